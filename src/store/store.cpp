#include "store/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "gguf/gguf.h"
#include "store/file_io.h"
#include "store/sha256.h"
#include "store/source.h"

namespace df::store {

namespace fs = std::filesystem;

nlohmann::json record_to_json(const Record& r) {
  nlohmann::json j = {{"name", r.name}, {"kind", r.kind}, {"source", r.source}, {"size", r.size},
                      {"sha256", r.sha256}, {"date", r.date}};
  if (!r.spec.empty()) j["spec"] = r.spec;
  if (!r.repo.empty()) j["repo"] = r.repo;
  if (!r.revision.empty()) j["revision"] = r.revision;
  if (!r.file.empty()) j["file"] = r.file;
  if (!r.tensors.empty()) j["tensors"] = r.tensors;
  if (r.source_size) j["source_size"] = r.source_size;
  return j;
}

Record record_from_json(const nlohmann::json& j, const std::string& where) {
  try {
    Record r;
    r.name = j.at("name").get<std::string>();
    r.kind = j.at("kind").get<std::string>();
    r.source = j.at("source").get<std::string>();
    r.size = j.at("size").get<uint64_t>();
    r.sha256 = j.at("sha256").get<std::string>();
    r.date = j.at("date").get<std::string>();
    r.spec = j.value("spec", "");
    r.repo = j.value("repo", "");
    r.revision = j.value("revision", "");
    r.file = j.value("file", "");
    r.tensors = j.value("tensors", std::vector<std::string>{});
    r.source_size = j.value("source_size", uint64_t{0});
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error("bad store record " + where + ": " + e.what());
  }
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

std::string Store::default_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* h = std::getenv("DISKFORMER_HOME"); h && *h) return h;
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw Error("no store folder: pass --store DIR or set DISKFORMER_HOME (HOME is not set)");
  return std::string(home) + "/.cache/diskformer";
}

Store::Store(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) throw Error("cannot create the store folder '" + dir_ + "': " + ec.message());
}

namespace {
void check_name(const std::string& name) {
  if (!valid_name(name))
    throw Error("bad model name '" + name + "': use 1..128 of A-Z a-z 0-9 . _ - (not starting with . or -)");
}
}  // namespace

std::string Store::model_path(const std::string& name) const { return dir_ + "/" + name + ".gguf"; }
std::string Store::part_path(const std::string& name) const { return dir_ + "/" + name + ".gguf.part"; }
std::string Store::record_path(const std::string& name) const { return dir_ + "/" + name + ".json"; }

std::optional<Record> Store::find(const std::string& name) const {
  if (!valid_name(name)) return std::nullopt;
  std::ifstream in(record_path(name));
  if (!in) return std::nullopt;
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw Error("bad store record '" + record_path(name) + "': " + e.what());
  }
  Record r = record_from_json(j, "'" + record_path(name) + "'");
  if (r.name != name) throw Error("store record '" + record_path(name) + "' names '" + r.name + "'");
  if (!fs::is_regular_file(model_path(name))) return std::nullopt;
  return r;
}

std::vector<Record> Store::list() const {
  std::vector<Record> out;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const fs::path p = e.path();
    if (p.extension() != ".json") continue;
    if (auto r = find(p.stem().string())) out.push_back(*r);
  }
  std::sort(out.begin(), out.end(), [](const Record& a, const Record& b) { return a.name < b.name; });
  return out;
}

void Store::remove(const std::string& name) {
  check_name(name);
  bool any = false;
  for (const std::string& p : {record_path(name), model_path(name), part_path(name)}) {
    std::error_code ec;
    if (fs::remove(p, ec)) any = true;
    if (ec) throw Error("cannot remove '" + p + "': " + ec.message());
  }
  if (!any) throw Error("no model named '" + name + "' in the store " + dir_);
}

Record Store::commit(Record r) {
  check_name(r.name);
  // The record goes first out of the way, so that a crash between the two steps leaves
  // either the old pair, or a model without a record (not listed, replaced by a new pull).
  std::error_code ec;
  fs::remove(record_path(r.name), ec);
  atomic_rename(part_path(r.name), model_path(r.name));
  r.date = utc_now();
  write_file_atomic(record_path(r.name), record_to_json(r).dump(2) + "\n");
  return r;
}

Record Store::import_file(const std::string& path, const std::string& name) {
  check_name(name);
  if (find(name)) throw Error("a model named '" + name + "' is already in the store (diskformer rm " + name + " first)");
  uint64_t size = 0;
  {
    auto f = gguf::File::open(path);  // validated: header, tensor extents
    size = f->file_size();
  }
  require_free_space(dir_, size, "'" + path + "'");
  Sha256 hash;
  {
    PartFile part(part_path(name));
    part.truncate(0);
    std::FILE* in = std::fopen(path.c_str(), "rb");
    if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
    std::vector<uint8_t> buf(1 << 20);
    uint64_t done = 0;
    try {
      for (;;) {
        const size_t n = std::fread(buf.data(), 1, buf.size(), in);
        if (n == 0) break;
        write_all(part.fd(), buf.data(), n, part.path(), size > done + n ? size - done - n : 0);
        hash.update(buf.data(), n);
        done += n;
      }
      if (std::ferror(in)) throw Error("error reading '" + path + "'");
      if (done != size) throw Error("'" + path + "' changed while it was imported");
      part.sync();
    } catch (...) {
      std::fclose(in);
      part.close_and_remove();
      throw;
    }
    std::fclose(in);
  }
  Record r;
  r.name = name;
  r.kind = "import";
  r.source = fs::absolute(path).string();
  r.size = size;
  r.sha256 = hash.finish();
  return commit(r);
}

std::string resolve_model(const std::string& m, const std::string& store_flag) {
  std::error_code ec;
  if (fs::is_regular_file(m, ec)) return m;
  if (valid_name(m)) {
    const std::string dir = Store::default_dir(store_flag);
    if (fs::is_directory(dir, ec)) {
      Store s(dir);
      if (auto r = s.find(m)) return s.model_path(m);
    }
    if (fs::exists(m, ec)) return m;  // not a regular file: the GGUF reader says what is wrong
    throw Error("no file '" + m + "' and no model named '" + m + "' in the store " + dir +
                " (diskformer models lists it; diskformer pull adds to it)");
  }
  if (fs::exists(m, ec)) return m;
  throw Error("no file '" + m + "'");
}

}  // namespace df::store
