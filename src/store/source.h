// What `diskformer pull SPEC` fetches: an http(s) URL, hf://OWNER/REPO@REVISION/FILE, or the
// name of a preset (the pinned files of the seed engines), resolved to a download address
// with its pins (size, sha256) and the store name it gets by default. Nothing is fetched.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace df::store {

// [absolute offset, length] of bytes in a remote file.
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool operator==(const ByteRange&) const = default;
};

struct Preset {
  std::string name;
  std::string repo;      // Hugging Face OWNER/REPO
  std::string revision;  // commit
  std::string file;
  uint64_t size = 0;
  std::string sha256;  // empty where the seed gives none: the size pins the file
  // Tensor patterns taken by range reads when pulled (empty: the whole file).
  std::vector<std::string> tensors;
  // Where those tensors' bytes lie in the remote file (contiguous tensors merged): a range
  // read checks the header it parses against this before downloading.
  std::vector<ByteRange> ranges;
  std::string description;
};
// qwen3-4b-q8_0, underdog-saluki-27b-iq2, ternary-bonsai-2-27b-mtp.
const std::vector<Preset>& presets();
const Preset* find_preset(const std::string& name);

struct Source {
  std::string spec;  // as given
  std::string url;   // download address
  std::string repo, revision, file;  // Hugging Face sources (file: the name in the repository)
  std::string preset;                // preset name, or empty
  std::optional<uint64_t> size;      // pinned size
  std::string sha256;                // pinned digest (lowercase hex), or empty
  std::vector<std::string> tensors;  // the preset's tensor patterns
  std::vector<ByteRange> ranges;     // and where their bytes are pinned to be
  std::string name;                  // default store name
};

// https://huggingface.co/OWNER/REPO/resolve/REVISION/FILE
std::string hf_url(const std::string& repo, const std::string& revision, const std::string& file);
// Resolves SPEC; throws df::Error naming what is wrong (unknown preset, malformed hf:// spec,
// unsupported scheme).
Source resolve_spec(const std::string& spec);
// Store names: 1..128 of [A-Za-z0-9._-], not starting with '.' or '-'.
bool valid_name(const std::string& name);
// A store name from a file name: the last path component without ".gguf", with characters
// outside the name alphabet replaced by '_'.
std::string name_from_file(const std::string& file);

}  // namespace df::store
