// The model store: a folder of GGUF files, each with a small JSON record of where it came
// from (source, revision, size, sha256, date). Files arrive as NAME.gguf.part and appear as
// NAME.gguf by an atomic rename only, followed by NAME.json; a model is listed and resolved
// only through its record, so a partial file is never used as a model.
//
//   DIR/NAME.gguf       the model
//   DIR/NAME.json       its record
//   DIR/NAME.gguf.part  a download in progress (resumed by the next pull of NAME)
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace df::store {

struct Record {
  std::string name;
  std::string kind;      // "download", "tensors" (range reads of some tensors) or "import"
  std::string source;    // URL, or the imported file's path
  std::string spec;      // what was asked for (pull SPEC), empty for imports
  std::string repo, revision, file;  // Hugging Face sources
  uint64_t size = 0;     // of the stored file
  std::string sha256;    // of the stored file
  std::string date;      // UTC, ISO 8601
  std::vector<std::string> tensors;   // kind "tensors": the patterns
  uint64_t source_size = 0;           // kind "tensors": the remote file's size
};
nlohmann::json record_to_json(const Record& r);
Record record_from_json(const nlohmann::json& j, const std::string& where);

class Store {
 public:
  // --store DIR if given, else $DISKFORMER_HOME, else ~/.cache/diskformer.
  static std::string default_dir(const std::string& flag);
  // Opens (and creates) the store folder.
  explicit Store(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string model_path(const std::string& name) const;
  std::string part_path(const std::string& name) const;
  std::string record_path(const std::string& name) const;

  // The record of a stored model whose file is present, or nothing.
  std::optional<Record> find(const std::string& name) const;
  // Every stored model, by name.
  std::vector<Record> list() const;
  // Removes the model, its record and any partial download; throws when there is none.
  void remove(const std::string& name);
  // Moves a finished part into place (atomic rename), then writes the record. The record's
  // date is set here.
  Record commit(Record r);
  // Copies a local GGUF into the store (validated as GGUF first, hashed while copied).
  Record import_file(const std::string& path, const std::string& name);

 private:
  std::string dir_;
};

// Today in UTC, ISO 8601 (2026-12-01T08:00:00Z).
std::string utc_now();
// What `-m M` means: an existing regular file as is; else the name of a stored model (in the
// store that store_flag selects, see Store::default_dir); else any other existing path (for
// the GGUF reader to reject). Throws naming both the file and the store when neither.
std::string resolve_model(const std::string& m, const std::string& store_flag);

}  // namespace df::store
