// Requests in flight: the limits per connection and per key, and charges given back.
#include <catch2/catch.hpp>

#include "server/in_flight.h"

#include <memory>
#include <vector>

using namespace xcargo::loader;

TEST_CASE("a connection may have 128 requests in flight, a key 512", "[in_flight]") {
  auto conn = std::make_shared<Usage>(), key = std::make_shared<Usage>();
  std::vector<std::unique_ptr<Charge>> held;
  for (int i = 0; i < kMaxRequestsPerConnection; ++i) {
    REQUIRE(over_limit(conn.get(), key.get(), 0, 1000) == "");
    held.push_back(std::make_unique<Charge>(conn, key, 0));
  }
  CHECK(over_limit(conn.get(), key.get(), 0, 1000) == "this connection has 128 requests in flight, the node's limit");
  // Other connections of the same key go on until the key's limit.
  for (int c = 1; c < kMaxRequestsPerKey / kMaxRequestsPerConnection; ++c) {
    auto other = std::make_shared<Usage>();
    for (int i = 0; i < kMaxRequestsPerConnection; ++i) held.push_back(std::make_unique<Charge>(other, key, 0));
  }
  auto fresh = std::make_shared<Usage>();
  CHECK(over_limit(fresh.get(), key.get(), 0, 1000) == "this key has 512 requests in flight, the node's limit");
  CHECK(over_limit(fresh.get(), nullptr, 0, 1000) == "");  // a connection without a key (an open node)
  held.clear();
  CHECK(conn->requests == 0);
  CHECK(key->requests == 0);
  CHECK(over_limit(conn.get(), key.get(), 0, 1000) == "");
}

TEST_CASE("data in flight is bounded by multiples of the largest request", "[in_flight]") {
  const uint64_t largest = 1000;
  auto conn = std::make_shared<Usage>(), key = std::make_shared<Usage>();
  {
    Charge a(conn, key, 1000), b(conn, key, 900);
    CHECK(conn->bytes == 1900);
    CHECK(over_limit(conn.get(), key.get(), 100, largest) == "");
    CHECK(over_limit(conn.get(), key.get(), 101, largest) ==
          "this connection has 1900 bytes of requests and unread replies in flight; 101 more would pass the node's limit of 2000");
    // A request over the node's limit is never fetched: it counts nothing.
    CHECK(over_limit(conn.get(), key.get(), 5000, largest) == "");
    auto other = std::make_shared<Usage>(), third = std::make_shared<Usage>();
    Charge c(other, key, 1000), d(other, key, 1000);
    CHECK(over_limit(third.get(), key.get(), 100, largest) == "");
    CHECK(over_limit(third.get(), key.get(), 101, largest) ==
          "this key has 3900 bytes of requests and unread replies in flight; 101 more would pass the node's limit of 4000");
  }
  CHECK(conn->bytes == 0);
  CHECK(key->bytes == 0);
}

TEST_CASE("unread replies count against new requests, and past the limit close the connection", "[in_flight]") {
  const uint64_t largest = 1000;
  auto conn = std::make_shared<Usage>(), key = std::make_shared<Usage>();
  {
    Charge reply(conn, key, 1500, Charge::reply);
    CHECK(conn->requests == 0);  // a reply is no request
    CHECK(conn->replies == 1500);
    CHECK(over_limit(conn.get(), key.get(), 500, largest) == "");
    CHECK(over_limit(conn.get(), key.get(), 501, largest) ==
          "this connection has 1500 bytes of requests and unread replies in flight; 501 more would pass the node's limit of 2000");
    CHECK(unread_over_limit(conn.get(), key.get(), 500, largest) == "");
    CHECK(unread_over_limit(conn.get(), key.get(), 501, largest) ==
          "this connection has 1500 bytes of replies its client has not read; 501 more would pass the node's limit of 2000");
    auto other = std::make_shared<Usage>();
    Charge a(other, key, 1500, Charge::reply), b(std::make_shared<Usage>(), key, 900, Charge::reply);
    CHECK(unread_over_limit(other.get(), key.get(), 101, largest) ==
          "this key has 3900 bytes of replies its client has not read; 101 more would pass the node's limit of 4000");
  }
  CHECK(conn->replies == 0);
  CHECK(key->replies == 0);
}

TEST_CASE("a small unread reply counts as 4 KiB: what holding it costs, not its bytes", "[in_flight]") {
  CHECK(unread_charge(0) == kUnreadReplyFloor);
  CHECK(unread_charge(60) == kUnreadReplyFloor);
  CHECK(unread_charge(kUnreadReplyFloor + 1) == kUnreadReplyFloor + 1);
  // With 64 MiB the largest request, a connection holds at most 32768 small replies unread.
  auto conn = std::make_shared<Usage>();
  const uint64_t largest = 64ull << 20;
  std::vector<std::unique_ptr<Charge>> held;
  while (unread_over_limit(conn.get(), nullptr, unread_charge(60), largest).empty())
    held.push_back(std::make_unique<Charge>(conn, nullptr, unread_charge(60), Charge::reply));
  CHECK(held.size() == 32768);
}
