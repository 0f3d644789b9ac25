// `diskformer pull SPEC`: fetch a model into the store (see src/store). SPEC is an http(s)
// URL, hf://OWNER/REPO@REVISION/FILE or a preset; --tensors takes only some tensors by range
// reads. Ctrl-C keeps the partial download for the next pull of the same name to resume.
#include <atomic>
#include <csignal>
#include <cstdio>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common.h"
#include "common/error.h"
#include "store/file_io.h"
#include "store/pull.h"

namespace df::cli {

namespace {
std::atomic<bool> g_interrupted{false};
// The first Ctrl-C stops the transfer cleanly (the part is kept); a second one kills.
void on_sigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);
}
}  // namespace

void register_pull(CLI::App& app) {
  struct Flags {
    store::PullRequest req;
    uint64_t size = 0;
    std::string store_dir;
    int retries = 8;
    bool quiet = false;
    bool dry_run = false;
    std::string output = "text";
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("pull", "download a model into the store (URL, hf://OWNER/REPO@REVISION/FILE or a preset)");
  std::string presets;
  for (const auto& p : store::presets()) presets += "\n  " + p.name + ": " + p.description;
  cmd->footer("Presets:" + presets);
  cmd->add_option("spec", f->req.spec, "http(s):// URL, hf://OWNER/REPO@REVISION/FILE, or a preset name")->required();
  cmd->add_option("--sha256", f->req.sha256, "pin the file's sha256 (hex)");
  cmd->add_option("--size", f->size, "pin the file's size in bytes")->check(CLI::PositiveNumber);
  cmd->add_option("--name", f->req.name, "store name (default: the preset's, or the file name without .gguf)");
  cmd->add_option("--tensors", f->req.tensors,
                  "take only the tensors matching this glob (repeatable), by range reads of the remote file");
  add_store_flag(*cmd, f->store_dir);
  cmd->add_option("--retries", f->retries, "retries of a failing transfer without progress")->check(CLI::NonNegativeNumber);
  cmd->add_flag("-q,--quiet", f->quiet, "no progress bar");
  cmd->add_flag("--dry-run", f->dry_run, "print what would be fetched (address, pins, name, tensors) and stop");
  cmd->add_option("--output", f->output, "text or json (the record)")->check(CLI::IsMember({"text", "json"}));
  cmd->callback([f] {
    if (f->size) f->req.size = f->size;
    if (f->dry_run) {
      const store::PullPlan p = store::plan_pull(f->req);
      nlohmann::json j = {{"name", p.name}, {"url", p.source.url}, {"tensors", p.tensors}};
      if (!p.source.preset.empty()) j["preset"] = p.source.preset;
      if (!p.source.repo.empty()) j["repo"] = p.source.repo;
      if (!p.source.revision.empty()) j["revision"] = p.source.revision;
      if (p.source.size) j["size"] = *p.source.size;
      if (!p.source.sha256.empty()) j["sha256"] = p.source.sha256;
      for (const auto& r : p.ranges) j["ranges"].push_back({r.offset, r.length});
      if (f->output == "json") {
        std::printf("%s\n", j.dump(2).c_str());
      } else {
        for (const auto& [k, v] : j.items())
          std::printf("%-9s %s\n", (k + ":").c_str(), v.is_string() ? v.get<std::string>().c_str() : v.dump().c_str());
      }
      return;
    }
    store::Store st(store::Store::default_dir(f->store_dir));
    store::TransferOptions opt;
    opt.http.max_retries = f->retries;
    opt.http.cancel = &g_interrupted;
    const store::PullPlan plan = store::plan_pull(f->req);
    const std::string label = plan.name;
    double last_draw = -1e9;
    if (!f->quiet) {
      // On a terminal one line redrawn 10 times a second; in a log a line every 5 seconds.
      const bool tty = ::isatty(STDERR_FILENO) != 0;
      opt.on_progress = [label, last_draw, tty](const store::Progress& p) mutable {
        if (!p.finished && p.seconds - last_draw < (tty ? 0.1 : 5.0)) return;
        last_draw = p.seconds;
        const std::string line = store::progress_line(label, p);
        if (tty)
          std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), p.finished ? "\n" : "");
        else
          std::fprintf(stderr, "%s\n", line.c_str());
        std::fflush(stderr);
      };
      opt.on_note = [](const std::string& s) { std::fprintf(stderr, "\n%s\n", s.c_str()); };
    }
    auto old = std::signal(SIGINT, on_sigint);
    store::PullResult r;
    try {
      r = store::pull(st, f->req, opt);
    } catch (const store::Cancelled&) {
      std::signal(SIGINT, old);
      throw Error("interrupted: the partial download " + st.part_path(plan.name) +
                  " is kept; run the same pull again to resume");
    }
    std::signal(SIGINT, old);
    if (f->output == "json") {
      nlohmann::json j = store::record_to_json(r.record);
      j["path"] = st.model_path(r.record.name);
      j["already_present"] = r.already_present;
      j["resumed_from"] = r.resumed_from;
      j["transferred"] = r.transferred;
      std::printf("%s\n", j.dump(2).c_str());
    } else if (r.already_present) {
      std::printf("%s is already in the store: %s\n", r.record.name.c_str(), st.model_path(r.record.name).c_str());
    } else {
      std::printf("%s: %s (%s, sha256 %s)%s\n", r.record.name.c_str(), st.model_path(r.record.name).c_str(),
                  store::human_bytes(static_cast<double>(r.record.size)).c_str(), r.record.sha256.c_str(),
                  r.resumed_from ? (" resumed from " + store::human_bytes(static_cast<double>(r.resumed_from))).c_str() : "");
    }
  });
}

}  // namespace df::cli
