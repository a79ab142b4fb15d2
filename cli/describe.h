// Text and JSON descriptions of a loaded cargo, shared by inspect and verify.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "xcargo/cargo.h"

namespace xcargo::cli {

// signatures_checked: whether Signer::trusted reflects a real check against a trust store.
nlohmann::json cargo_json(const Cargo& cargo, const std::string& file, bool signatures_checked);
std::string cargo_text(const Cargo& cargo, const std::string& file, bool signatures_checked);
// The architecture a target triple names: "aarch64" from "aarch64-unknown-linux-gnu".
std::string arch_of(const std::string& triple);

}  // namespace xcargo::cli
