// log_word: a peer's word in a log line stays one word.
#include <catch2/catch.hpp>

#include "xcargo/types.h"

using namespace xcargo;

TEST_CASE("log_word leaves plain words alone and quotes the rest", "[text]") {
  CHECK(log_word("1.2.3-rc.1+build~5_x") == "1.2.3-rc.1+build~5_x");
  CHECK(log_word("1, signed by 1111111111111111 (ops.pub); from 10.9.8.7:9 key 22") ==
        "\"1, signed by 1111111111111111 (ops.pub); from 10.9.8.7:9 key 22\"");
  CHECK(log_word("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(log_word("") == "\"\"");
}
