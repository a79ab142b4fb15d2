// Adding signatures to cargos (build side); the keys themselves are in identity.h.
#pragma once

#include <memory>
#include <string>

#include "xcargo/error.h"
#include "xcargo/identity.h"
#include "xcargo/trust.h"
#include "xcargo/types.h"

namespace xcargo {

// Adds a signature by key to a cargo and returns the new bytes. The cargo's content must
// pass every check but trust first. If the key already signed it, returns it unchanged and
// sets *already_signed.
Result<Bytes> sign_cargo(ByteView cargo, const SigningKey& key, bool* already_signed = nullptr);

// Appends a signature after checking only the container structure (spec steps 1-3): for
// making test vectors whose manifest or payloads are deliberately wrong. Tools use sign_cargo.
Result<Bytes> add_signature(ByteView cargo, const SigningKey& key);

}  // namespace xcargo
