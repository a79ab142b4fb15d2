// The verb table: each verb adds its CLI11 subcommand and returns the function that runs it.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace xcargo::cli {

using Runner = std::function<int()>;

struct Verb {
  const char* name;
  Runner (*add)(CLI::App& app);  // registers the subcommand; the Runner reads its options
};

Runner add_keygen(CLI::App& app);
Runner add_build(CLI::App& app);
Runner add_sign(CLI::App& app);
Runner add_verify(CLI::App& app);
Runner add_inspect(CLI::App& app);
Runner add_extract(CLI::App& app);
Runner add_run(CLI::App& app);
Runner add_push(CLI::App& app);
Runner add_ls(CLI::App& app);
Runner add_known_nodes(CLI::App& app);

// `xcargo --version`; verbose adds where xcargo finds its kernel headers, clang and the loader.
int print_version(bool verbose);

// Adding a verb: one verb_NAME.cpp with add_NAME(), and one line here.
inline constexpr Verb kVerbs[] = {
    {"keygen", add_keygen}, {"build", add_build},     {"sign", add_sign},
    {"verify", add_verify}, {"inspect", add_inspect}, {"extract", add_extract},
    {"push", add_push},     {"run", add_run},         {"ls", add_ls},
    {"known-nodes", add_known_nodes},
};

}  // namespace xcargo::cli
