// The Catch2 main for xcargo's unit test binary.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
