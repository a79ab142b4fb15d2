// JSON log lines: escaping, the fields found in a line's wording, and /usr/bin/python3's json
// module reading every line.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "log_json.h"
#include "support.h"

using namespace xcargo::loader;

TEST_CASE("json_escape escapes quotes, controls and everything outside ASCII", "[log_json]") {
  CHECK(json_escape("plain") == "plain");
  CHECK(json_escape("a\"b\\c") == "a\\\"b\\\\c");
  // Controls become '?', as in the text log: `jq -r .message` must not write one to a terminal.
  CHECK(json_escape("l1\nl2\tx\r") == "l1?l2?x?");
  CHECK(json_escape(std::string("\x1b[2J\x7f", 5)) == "?[2J?");
  CHECK(json_escape(std::string("\0", 1)) == "?");
  CHECK(json_escape("\xc2\x9b") == "?");                            // C1: an 8-bit terminal's CSI
  CHECK(json_escape("\xe2\x80\xa8\xe2\x81\xa6") == "??");             // a line separator, an isolate
  CHECK(json_escape("caf\xc3\xa9") == "caf\\u00e9");
  CHECK(json_escape("\xe2\x80\xae") == "?");                       // a direction override
  CHECK(json_escape("\xf0\x9f\x98\x80") == "\\ud83d\\ude00");      // past U+FFFF: a surrogate pair
  CHECK(json_escape("\xff\xc3") == "\\ufffd\\ufffd");               // not UTF-8
  CHECK(json_escape("\xc0\xaf") == "\\ufffd\\ufffd");               // overlong
  CHECK(json_escape("\xed\xa0\x80") == "\\ufffd\\ufffd\\ufffd");    // a surrogate
}

TEST_CASE("fields are found in the lines' wording", "[log_json]") {
  LogFields f = log_fields("accepted invoke: 0ebf63e0ea55dc38/add -> ok (10.6 us), signed by 1234 (ci); from 127.0.0.1:4000 key abcd1234 (ci)");
  CHECK(f.level == "info");
  CHECK(f.cargo == "0ebf63e0ea55dc38");
  CHECK(f.entry == "add");
  CHECK(f.status == "ok");
  CHECK(f.client == "abcd1234");
  CHECK(f.peer == "127.0.0.1:4000");
  f = log_fields("failed invoke: the kernel crashed: signal 11 (Segmentation fault) at address 0x0 (cargo 0ebf63e0ea55dc38/crash, from 127.0.0.1:9 key ab (x)); restarting the worker");
  CHECK(f.level == "warning");
  CHECK(f.status == "crashed");
  CHECK(f.cargo == "0ebf63e0ea55dc38");
  CHECK(f.entry == "crash");
  CHECK(log_fields("error: cache /x: denied").level == "error");
  f = log_fields("accepted client from 127.0.0.1:37728: key aa5b631d0d3e4f80 (me): may push");
  CHECK(f.peer == "127.0.0.1:37728");
  CHECK(f.client == "aa5b631d0d3e4f80");
  CHECK(log_fields("listening on 127.0.0.1:1; node key 2a5722234f0de3ad; 1 authorized client keys").client.empty());
  {  // a kernel's xc_log line names no field, whatever its text says
    const LogFields k = log_fields("att2/logtext: error: accepted invoke: 0123456789abcdef/steal -> ok (1 us); from 10.9.8.7:4444 key e811f10e23a41b0f");
    CHECK(k.level == "info");
    CHECK(k.cargo.empty());
    CHECK(k.entry.empty());
    CHECK(k.status.empty());
    CHECK(k.client.empty());
    CHECK(k.peer.empty());
  }
  f = log_fields("listening on 127.0.0.1:7400");
  CHECK(f.cargo.empty());
  CHECK(f.status.empty());
}

TEST_CASE("every JSON line parses with python's json module", "[log_json]") {
  std::vector<std::string> lines = {
      "listening on 127.0.0.1:1 (same-host door)",
      "accepted invoke: 0ebf63e0ea55dc38/add -> ok (1.0 us); from 127.0.0.1:2 key 00ff (n\"a\\me)",
      std::string("a kernel's entry: \x1b]52;c;aGk=\x07 \xe2\x80\xae evil \xff\xfe\x00 end", 44),
      std::string(kMaxJsonMessage + 100, 'x'),
      "\xf0\x9f\x98\x80 \t tab",
  };
  for (int c = 1; c < 256; ++c) lines.push_back(std::string("byte ") + char(c) + " here");
  xcargo::test::ScratchDir dir;
  const std::string path = dir.path() + "/log.jsonl";
  {
    std::ofstream out(path, std::ios::binary);
    for (const std::string& l : lines) out << json_log_line("2026-11-29T10:00:00.000000Z", 42, l) << '\n';
  }
  const std::string check = path + ".py";
  {
    std::ofstream py(check);
    py << "import json, sys\n"
          "n = 0\n"
          "for raw in open(sys.argv[1], 'rb'):\n"
          "    raw.decode('ascii')\n"
          "    o = json.loads(raw)\n"
          "    assert set(['time', 'level', 'pid', 'message']) <= set(o), o\n"
          "    assert o['pid'] == 42 and len(o['message']) <= " << kMaxJsonMessage << "\n"
          "    n += 1\n"
          "assert n == " << lines.size() << ", n\n"
          "print('ok', n)\n";
  }
  const int rc = std::system(("/usr/bin/python3 " + check + " " + path + " >/dev/null").c_str());
  CHECK(rc == 0);
}
