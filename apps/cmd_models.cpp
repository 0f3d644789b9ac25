// The store's other commands: `models` (list), `rm NAME`, `import FILE [--name NAME]`.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common.h"
#include "common/error.h"
#include "store/file_io.h"
#include "store/source.h"
#include "store/store.h"

namespace df::cli {

void add_store_flag(CLI::App& app, std::string& dir) {
  app.add_option("--store", dir, "model store folder (default: $DISKFORMER_HOME, else ~/.cache/diskformer)");
}

void register_store_commands(CLI::App& app) {
  {
    struct Flags {
      std::string store_dir, output = "text";
    };
    auto f = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand("models", "list the models in the store");
    add_store_flag(*cmd, f->store_dir);
    cmd->add_option("--output", f->output, "text or json")->check(CLI::IsMember({"text", "json"}));
    cmd->callback([f] {
      store::Store st(store::Store::default_dir(f->store_dir));
      const auto list = st.list();
      if (f->output == "json") {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& r : list) {
          j.push_back(store::record_to_json(r));
          j.back()["path"] = st.model_path(r.name);
        }
        std::printf("%s\n", j.dump(2).c_str());
        return;
      }
      std::printf("store: %s\n", st.dir().c_str());
      if (list.empty()) std::printf("(no models)\n");
      for (const auto& r : list)
        std::printf("%-32s %10s  %-8s %s  %s\n", r.name.c_str(), store::human_bytes(static_cast<double>(r.size)).c_str(),
                    r.kind.c_str(), r.date.c_str(), r.source.c_str());
    });
  }
  {
    struct Flags {
      std::string name, store_dir;
    };
    auto f = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand("rm", "remove a model (and any partial download of it) from the store");
    cmd->add_option("name", f->name, "model name")->required();
    add_store_flag(*cmd, f->store_dir);
    cmd->callback([f] {
      store::Store st(store::Store::default_dir(f->store_dir));
      st.remove(f->name);
      std::printf("removed %s\n", f->name.c_str());
    });
  }
  {
    struct Flags {
      std::string file, name, store_dir;
    };
    auto f = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand("import", "copy a local GGUF file into the store");
    cmd->add_option("file", f->file, "GGUF file")->required();
    cmd->add_option("--name", f->name, "store name (default: the file name without .gguf)");
    add_store_flag(*cmd, f->store_dir);
    cmd->callback([f] {
      store::Store st(store::Store::default_dir(f->store_dir));
      const std::string name = f->name.empty() ? store::name_from_file(f->file) : f->name;
      const store::Record r = st.import_file(f->file, name);
      std::printf("%s: %s (%s, sha256 %s)\n", r.name.c_str(), st.model_path(r.name).c_str(),
                  store::human_bytes(static_cast<double>(r.size)).c_str(), r.sha256.c_str());
    });
  }
}

}  // namespace df::cli
