#include "spec/spec_options.h"

#include "common/error.h"

namespace df::spec {

SpecMode parse_spec_mode(const std::string& s) {
  if (s == "mtp" || s == "draft-mtp") return SpecMode::MTP;
  if (s == "none") return SpecMode::NONE;
  throw Error("unknown speculative decoding mode '" + s + "' (mtp | draft-mtp | none)");
}

}  // namespace df::spec
