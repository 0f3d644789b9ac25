#include "store/source.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"

namespace df::store {

const std::vector<Preset>& presets() {
  // From the seed engines (../shared/seeds): QWEN3_4B_Q8 and UNDERDOG_SALUKI_27B in
  // engines/qwen35_dense.js, MTP_HEAD in engines/ternary_bonsai_2_mtp.js. The MTP head
  // preset range-reads the head block (blk.64.*) and the trunk's output_norm out of the
  // grafted 6.4 GB file; the seed gives no sha256 for it, its size pins it.
  static const std::vector<Preset> p = {
      {"qwen3-4b-q8_0", "Qwen/Qwen3-4B-GGUF", "bc640142c66e1fdd12af0bd68f40445458f3869b", "Qwen3-4B-Q8_0.gguf",
       4280404704ull, "8c2f07f26af9747e41988551106f149b03eb9b5cb6df636027b6bf6278473300", {}, {},
       "Qwen3 4B, Q8_0 (the FlashMap drafter's target)"},
      {"underdog-saluki-27b-iq2", "ConwayResearch/Underdog-Saluki-27B-1.0", "1336c0b5d74dfe6ad7f793577092f5effd9f97c6",
       "Underdog-Saluki-27B-1.0-IQ2-mix.gguf", 7898369152ull,
       "4a673518b11b1c4445f9b9a9d3c40356f5ba39f6a6260dcb25f3fbfd475d9efb", {}, {},
       "Underdog Saluki 27B (qwen35), IQ2 mix"},
      {"ternary-bonsai-2-27b-mtp", "CaryPalmer/Ternary-Bonsai-2-27B-262k-GGUF",
       "9f9b92cd8229cb13e473ca3d11055c3f60276508", "Ternary-Bonsai-2-27B-PTQ1_0-mtp-procreations.gguf", 6397970272ull,
       "", {"blk.64.*", "output_norm.weight"},
       // MTP_HEAD.ranges: the trunk's output_norm.weight, then the whole blk.64 block to the end.
       {{289240928ull, 20480ull}, {5946650464ull, 451319808ull}},
       "the MTP head of Ternary Bonsai 2 27B (blk.64, Q8_0, 451 MB) and the trunk's output_norm, range-read"},
  };
  return p;
}

const Preset* find_preset(const std::string& name) {
  for (const Preset& p : presets())
    if (p.name == name) return &p;
  return nullptr;
}

std::string hf_url(const std::string& repo, const std::string& revision, const std::string& file) {
  return "https://huggingface.co/" + repo + "/resolve/" + revision + "/" + file;
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.' || name[0] == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

std::string name_from_file(const std::string& file) {
  std::string n = file.substr(file.find_last_of('/') == std::string::npos ? 0 : file.find_last_of('/') + 1);
  const auto q = n.find_first_of("?#");
  if (q != std::string::npos) n.resize(q);
  if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) n.resize(n.size() - 5);
  for (char& c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  while (!n.empty() && (n[0] == '.' || n[0] == '-')) n.erase(0, 1);
  if (n.size() > 128) n.resize(128);
  return n.empty() ? "model" : n;
}

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

bool url_safe(const std::string& s) {
  return std::none_of(s.begin(), s.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)) || c < 0x20; });
}

// hf://OWNER/REPO@REVISION/FILE (FILE may have folders; without @REVISION: "main").
Source parse_hf(const std::string& spec) {
  const std::string rest = spec.substr(5);
  const std::string usage = "bad hf:// spec '" + spec + "': expected hf://OWNER/REPO@REVISION/FILE";
  const auto s1 = rest.find('/');
  if (s1 == std::string::npos || s1 == 0) throw Error(usage);
  const auto s2 = rest.find('/', s1 + 1);
  if (s2 == std::string::npos || s2 + 1 >= rest.size()) throw Error(usage + " (no FILE)");
  std::string repo = rest.substr(0, s2);
  std::string revision = "main";
  if (const auto at = repo.find('@'); at != std::string::npos) {
    revision = repo.substr(at + 1);
    repo.resize(at);
    if (revision.empty()) throw Error(usage + " (empty REVISION)");
  }
  if (repo.find('@') != std::string::npos || repo.size() <= s1 + 1)
    throw Error(usage + " (bad OWNER/REPO)");
  Source s;
  s.spec = spec;
  s.repo = repo;
  s.revision = revision;
  s.file = rest.substr(s2 + 1);
  if (!url_safe(s.repo + s.revision + s.file)) throw Error(usage + " (whitespace or control characters)");
  s.url = hf_url(s.repo, s.revision, s.file);
  s.name = name_from_file(s.file);
  return s;
}

}  // namespace

Source resolve_spec(const std::string& spec) {
  if (spec.empty()) throw Error("empty SPEC: give an http(s):// URL, hf://OWNER/REPO@REVISION/FILE or a preset name");
  if (starts_with(spec, "hf://")) return parse_hf(spec);
  if (starts_with(spec, "http://") || starts_with(spec, "https://")) {
    const auto host = spec.find("://") + 3;
    if (host >= spec.size() || spec[host] == '/' || !url_safe(spec)) throw Error("bad URL '" + spec + "'");
    Source s;
    s.spec = spec;
    s.url = spec;
    const auto path = spec.find('/', host);
    s.file = path == std::string::npos ? "" : spec.substr(path + 1);
    s.name = name_from_file(s.file);
    return s;
  }
  if (const Preset* p = find_preset(spec)) {
    Source s;
    s.spec = spec;
    s.preset = p->name;
    s.repo = p->repo;
    s.revision = p->revision;
    s.file = p->file;
    s.url = hf_url(p->repo, p->revision, p->file);
    s.size = p->size;
    s.sha256 = p->sha256;
    s.tensors = p->tensors;
    s.ranges = p->ranges;
    s.name = p->name;
    return s;
  }
  if (spec.find("://") != std::string::npos)
    throw Error("unsupported SPEC '" + spec + "': only http://, https:// and hf:// sources are supported");
  std::string names;
  for (const Preset& p : presets()) names += (names.empty() ? "" : ", ") + p.name;
  throw Error("unknown preset '" + spec + "' (presets: " + names +
              "; or give an http(s):// URL or hf://OWNER/REPO@REVISION/FILE)");
}

}  // namespace df::store
