// The line files of keys a person edits (authorized clients, known nodes): lines of words,
// '#' starting a comment, a key written as the base64 line of its .pub file. Internal to
// libcargo/auth.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/trust.h"

namespace xcargo::auth::lines {

// Calls each(words, line_no) for every line with words (comments and blank lines skipped);
// stops at the first error each returns.
template <typename Each>
Status for_each(std::string_view text, Each&& each) {
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string line(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::vector<std::string> words;
    for (size_t i = 0; i < line.size();) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
      if (j > i) words.push_back(line.substr(i, j - i));
      i = j;
    }
    if (words.empty()) continue;
    XC_TRY(each(words, line_no));
  }
  return {};
}

// The key a word holds (the second line of a .pub file); where names the line in errors.
Result<PublicKey> key(const std::string& word, const std::string& where);

// The base64 line of key's .pub file.
std::string key_word(const PublicKey& key);

}  // namespace xcargo::auth::lines
