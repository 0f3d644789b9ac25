// Range reads of single tensors out of a remote GGUF: the header is read with Range requests
// (growing until it parses), the tensors whose names match any of the glob patterns are
// chosen, and a local GGUF is written with the source's metadata and those tensors, each
// downloaded by its own Range request straight to its place in the .part file. The part is
// laid out sequentially, so an interrupted pull resumes from the part's length. A pull of a
// trunk without its MTP blocks says so in its metadata (trunk_rewrite).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "store/download.h"
#include "store/source.h"

namespace df::store {

// fnmatch(3) glob: '*', '?', '[...]'.
bool tensor_name_matches(const std::string& name, const std::vector<std::string>& patterns);

struct TensorPullResult {
  uint64_t remote_size = 0;
  uint64_t header_bytes = 0;       // bytes of the remote file read to parse its header
  std::vector<std::string> tensors;  // names written, in the source's order
  uint64_t tensor_bytes = 0;       // their data bytes
  uint64_t size = 0;               // the local file
  std::string sha256;              // of the local file
  uint64_t resumed_from = 0;
  uint64_t transferred = 0;        // body bytes received by this call (header included)
  bool trunk = false;              // written as a trunk (see trunk_rewrite)
};

// A pull that takes no tensor of the MTP (nextn) blocks of a file that has them
// ({arch}.nextn_predict_layers = k > 0 of {arch}.block_count = n: blocks n-k .. n-1) is a
// trunk: its metadata says block_count = n - k and has no nextn_predict_layers, so that it
// loads without a head (`--mtp-head` gives it one). Every other key is the source's.
struct TrunkRewrite {
  bool applies = false;
  std::string block_count_key, nextn_key;
  uint64_t trunk_layers = 0;
};
TrunkRewrite trunk_rewrite(const gguf::File& src, const std::vector<std::string>& chosen_names);

// Writes the local GGUF to part_path (complete on return; the caller renames it).
// expected_remote_size pins the remote file's size; expected_ranges (when not empty) pins
// where the chosen tensors' bytes lie in it. Throws when a pattern matches no tensor or a pin
// does not hold (before any tensor is downloaded).
TensorPullResult pull_tensors(const std::string& url, const std::string& part_path,
                              const std::vector<std::string>& patterns, std::optional<uint64_t> expected_remote_size,
                              const TransferOptions& opt, const std::vector<ByteRange>& expected_ranges = {});
// The absolute byte extents of the tensors, sorted, with tensors that follow each other
// (up to alignment padding) merged into one range.
std::vector<ByteRange> tensor_extents(const gguf::File& f, const std::vector<const gguf::TensorInfo*>& tensors);

}  // namespace df::store
