// Ed25519 signing keys for the tests of signed entries.
#pragma once

#include "base/ed25519.hpp"

namespace opcache::test {

/// A fresh random Ed25519 key pair; REQUIREs that generating it succeeds.
base::Ed25519PrivateKey new_signing_key();

}  // namespace opcache::test
