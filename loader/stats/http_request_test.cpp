// The metrics endpoint's request reader, against well-formed and hostile requests.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "stats/http_request.h"

using namespace xcargo::loader;

namespace {
HttpVerdict verdict(const std::string& r) { return parse_http_request(r).verdict; }
}  // namespace

TEST_CASE("GET /metrics and its neighbours", "[http]") {
  CHECK(verdict("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n") == HttpVerdict::metrics);
  CHECK(verdict("GET /metrics HTTP/1.0\r\n\r\n") == HttpVerdict::metrics);
  CHECK(verdict("GET /metrics?name[]=x HTTP/1.1\n\n") == HttpVerdict::metrics);  // bare LF
  const HttpRequest head = parse_http_request("HEAD /metrics HTTP/1.1\r\n\r\n");
  CHECK(head.verdict == HttpVerdict::metrics);
  CHECK(head.head_only);
  CHECK(verdict("GET / HTTP/1.1\r\n\r\n") == HttpVerdict::not_found);
  CHECK(verdict("GET /metricsx HTTP/1.1\r\n\r\n") == HttpVerdict::not_found);
  CHECK(verdict("POST /metrics HTTP/1.1\r\n\r\n") == HttpVerdict::bad_method);
  CHECK(verdict("GET /metrics HTTP/1.1\r\nHost: x\r\n") == HttpVerdict::incomplete);
  CHECK(verdict("") == HttpVerdict::incomplete);
}

TEST_CASE("malformed requests are refused", "[http]") {
  for (const char* r : {"GET  /metrics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/2\r\n\r\n", "GET metrics HTTP/1.1\r\n\r\n",
                        "GET /metrics\r\n\r\n", "GET /metrics HTTP/1.1 x\r\n\r\n", "GET /met\x01rics HTTP/1.1\r\n\r\n",
                        "GET /metrics HTTP/1.1\r\nno colon\r\n\r\n", "GET /metrics HTTP/1.1\r\n: empty\r\n\r\n",
                        "GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
                        "GET /metrics HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n", "\r\n\r\n",
                        "GET /metrics HTTP/1.1\r\nX: a\x1b[2Jb\r\n\r\n"})
    CHECK(verdict(r) == HttpVerdict::bad_request);
  CHECK(verdict("GET /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n") == HttpVerdict::metrics);
}

TEST_CASE("the head's size is bounded before anything is kept", "[http]") {
  std::string r = "GET /metrics HTTP/1.1\r\nX: " + std::string(kMaxHttpHead, 'a');
  CHECK(verdict(r.substr(0, kMaxHttpHead - 1)) == HttpVerdict::incomplete);
  CHECK(verdict(r) == HttpVerdict::too_large);
  CHECK(verdict(r + "\r\n\r\n") == HttpVerdict::too_large);  // its end past the limit is never looked for
  // A megabyte of newlines-free bytes: refused at once, read no further than the limit.
  CHECK(verdict(std::string(1 << 20, 'G')) == HttpVerdict::too_large);
}

TEST_CASE("random bytes never crash the reader and get a consistent verdict", "[http]") {
  std::mt19937 rng(48);
  const std::string seed = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  for (int i = 0; i < 20000; ++i) {
    std::string r = seed;
    const int edits = 1 + int(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % (r.size() + 1);
      switch (rng() % 3) {
        case 0: if (at < r.size()) r[at] = char(rng()); break;
        case 1: r.insert(at, 1, char(rng())); break;
        default: if (at < r.size()) r.erase(at, 1); break;
      }
    }
    if (rng() % 10 == 0) r = std::string(rng() % 6000, char(rng()));
    const HttpRequest q = parse_http_request(r);
    CHECK(q.head_size <= kMaxHttpHead);
    if (q.verdict == HttpVerdict::too_large) CHECK(r.size() >= kMaxHttpHead);
    if (q.verdict != HttpVerdict::incomplete && q.verdict != HttpVerdict::too_large) CHECK(q.head_size > 0);
    const std::string resp = http_response(q.verdict, q.head_only, "x 1\n");
    CHECK(resp.rfind("HTTP/1.1 ", 0) == 0);
  }
}

TEST_CASE("responses say their length and close", "[http]") {
  const std::string ok = http_response(HttpVerdict::metrics, false, "a 1\n");
  CHECK(ok.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(ok.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(ok.find("Content-Length: 4\r\n") != std::string::npos);
  CHECK(ok.find("Connection: close\r\n") != std::string::npos);
  CHECK(ok.substr(ok.size() - 4) == "a 1\n");
  const std::string head = http_response(HttpVerdict::metrics, true, "a 1\n");
  CHECK(head.substr(head.size() - 4) == "\r\n\r\n");
  CHECK(http_response(HttpVerdict::bad_method, false, "").rfind("HTTP/1.1 405", 0) == 0);
  CHECK(http_response(HttpVerdict::too_large, false, "").rfind("HTTP/1.1 431", 0) == 0);
}
