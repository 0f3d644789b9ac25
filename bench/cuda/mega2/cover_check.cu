// Host check of the second persistent chain's work split (persistent_chain2.cuh): for the
// bench's two chain shapes (2 layers each: the split does not depend on the layer count), at
// every grid the workbench runs and every U instantiated, every part of every row of every
// stage is loaded exactly once by the lane mv_kernel's would be, in order, and every partial
// written once (check_cover). No GPU needed. Exit 1 on the first failure.
//   bench_persist2_cover
#include <cstdio>
#include <vector>

#include "backend/cuda/matvec/launch.cuh"
#include "persistent_chain2.cuh"

namespace p2 = df::cudamv::persist2;

int main() {
  struct Shape {
    const char* name;
    int hidden, q, k, v, o_in, ffn;
  };
  const Shape shapes[] = {{"4b", 2560, 4096, 1024, 1024, 4096, 9728}, {"27b", 5120, 10240, 6144, 96, 6144, 17408}};
  static uint8_t fake[16];
  const uint8_t* base = fake;
  auto mat = [&](int rows, int cols) { return p2::Mat{base, base, rows, cols, cols / 2, cols / 16}; };
  int bad = 0;
  for (const Shape& sh : shapes) {
    std::vector<p2::LayerMats> layers(2);
    for (auto& l : layers)
      l = {mat(sh.q, sh.hidden), mat(sh.k, sh.hidden), mat(sh.v, sh.hidden), mat(sh.hidden, sh.o_in),
           mat(sh.ffn, sh.hidden), mat(sh.ffn, sh.hidden), mat(sh.hidden, sh.ffn)};
    std::vector<std::vector<float>> bufs;
    std::vector<int> wprs;
    const auto st = p2::make_stages(layers, nullptr, nullptr, 1e-6f,
                                    [](int64_t u, int64_t p) { return df::cudamv::mv_wpr(u, p); },
                                    [&](size_t n) {
                                      bufs.emplace_back(n);
                                      return bufs.back().data();
                                    },
                                    wprs);
    for (int warps : {132 * 16, 132 * 15, 132 * 24, 7 * 16}) {
      const std::string e2 = p2::check_cover<2>(st, warps), e4 = p2::check_cover<4>(st, warps);
      std::printf("%-4s wpr %d %d %d %d, %5d warps: U=2 %s, U=4 %s\n", sh.name, wprs[0], wprs[1], wprs[2], wprs[3], warps,
                  e2.empty() ? "ok" : e2.c_str(), e4.empty() ? "ok" : e4.c_str());
      bad += !e2.empty() + !e4.empty();
    }
  }
  return bad ? 1 : 0;
}
