// `diskformer pull`: a SPEC resolved to its source and pins, fetched into the store (whole
// file, or range reads of some tensors), checked, and committed with its record.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "store/download.h"
#include "store/source.h"
#include "store/store.h"

namespace df::store {

struct PullRequest {
  std::string spec;
  std::string name;                  // empty: the source's default name
  std::optional<uint64_t> size;      // --size: pins the (remote) file's size
  std::string sha256;                // --sha256: pins the whole file's digest
  std::vector<std::string> tensors;  // --tensors (empty: the preset's patterns, else the whole file)
};

// The source with the request's pins merged in; throws when a pin contradicts the preset's,
// or when --sha256 is given with tensor patterns (only the remote size can be checked then).
struct PullPlan {
  Source source;
  std::string name;
  std::vector<std::string> tensors;
  std::vector<ByteRange> ranges;  // pinned extents of those tensors (the preset's own patterns only)
};
PullPlan plan_pull(const PullRequest& req);

struct PullResult {
  Record record;
  bool already_present = false;  // an identical pull was in the store: nothing fetched
  uint64_t resumed_from = 0;
  uint64_t transferred = 0;
  uint64_t header_bytes = 0;  // range reads: bytes of the remote header read
  int restarts = 0;
};

PullResult pull(Store& store, const PullRequest& req, const TransferOptions& opt);

}  // namespace df::store
