// Host check of persistent_chain.cuh's warp walk (no GPU): for the 4B and 27B chain shapes
// (2 layers) and grids of 132 and 264 blocks, every part of every row of every stage is visited
// exactly once, by mv_kernel's lane (t = rl mod 32 wpr, in increasing order as k grows), the
// loader cursor walks the same sequence, and the warps of a group finish the same number of
// rows (their named barriers match). Built by hand (not part of the CMake build):
//   nvcc -std=c++20 -O1 -arch=sm_90 -Isrc -Ibench/cuda bench/cuda/mega/cursor_walk_check.cu -o /tmp/cwc && /tmp/cwc
#include "persistent_chain.cuh"
#include "backend/cuda/matvec/launch.cuh"
#include <cstdio>
#include <map>
#include <vector>
using namespace df::cudamv;
using namespace df::cudamv::persist;
int main() {
  bool all_ok = true;
  struct Sh { int hidden, q, k, v, o_in, ffn; } shs[] = {{2560, 4096, 1024, 1024, 4096, 9728}, {5120, 10240, 6144, 96, 6144, 17408}};
  for (auto sh : shs) for (int grid : {132, 264}) {
    std::vector<Stage> stv;
    for (int l = 0; l < 2; ++l) {
      Stage a{}, b{}, c{}, d{};
      a.rows[0] = sh.q, a.rows[1] = sh.k, a.rows[2] = sh.v, a.nmat = 3, a.units = sh.q + sh.k + sh.v, a.cols = sh.hidden;
      b.rows[0] = sh.hidden, b.nmat = 1, b.units = sh.hidden, b.cols = sh.o_in;
      c.rows[0] = c.rows[1] = sh.ffn, c.nmat = 2, c.pair = 1, c.units = sh.ffn, c.cols = sh.hidden;
      d.rows[0] = sh.hidden, d.nmat = 1, d.units = sh.hidden, d.cols = sh.ffn;
      for (Stage* st : {&a, &b, &c, &d}) { st->wpr = mv_wpr(st->pair ? 2 * st->units : st->units, st->cols / 32); stv.push_back(*st); }
    }
    // per (stage, mat, row): list of (part, lane-slot order) visited; check each part once and
    // per (sub, lane) in increasing order; count named-barrier hits per (block, group, stage)
    std::map<long, int> seen;  // key (stage, mat, row, part)
    long steps = 0; bool ok = true;
    std::map<long, std::vector<int>> finishes;  // (stage, blk, group) -> per warp count
    for (int blk = 0; blk < grid; ++blk) for (int w = 0; w < 8; ++w) {
      Cursor c; c.stages = stv.data(); c.nst = (int)stv.size(); c.blk = blk; c.warp = w; c.grid = grid; c.enter(0);
      Cursor ld = c;  // the loader runs the same walk
      std::map<long, int> lastpart;
      while (c.valid) {
        if (ld.s != c.s || ld.unit != c.unit || ld.k != c.k || ld.sr != c.sr) { ok = false; printf("ld/cp differ\n"); break; }
        int mat, row; c.row_of(mat, row);
        for (int lane = 0; lane < 32; ++lane) {
          int t = c.t_first() + lane;
          if (t >= c.nparts) continue;
          long key = (((long)c.s * 3 + mat) * 100000 + row) * 10000 + t;
          if (seen[key]++) { ok = false; }
          const int rl = c.sub * 32 + lane;  // mv_kernel's thread of the row takes t = rl mod 32 wpr
          if (t % (32 * c.wpr) != rl) ok = false;
        }
        if (c.last_chunk() && !(c.pair && c.sr == 0)) {
          long fk = ((long)c.s * 1000 + blk) * 8 + w / c.wpr;
          auto& v = finishes[fk]; v.resize(8); v[w]++;
        }
        ++steps; c.advance(); ld.advance();
      }
    }
    long expect = 0;
    for (size_t s = 0; s < stv.size(); ++s) for (int m = 0; m < stv[s].nmat; ++m) expect += (long)stv[s].rows[m] * (stv[s].cols / 32);
    long got = 0; for (auto& kv : seen) got += 1;
    for (auto& kv : finishes) { int w0 = -1; for (int i = 0; i < 8; ++i) if (kv.second[i]) { if (w0 < 0) w0 = kv.second[i]; else if (kv.second[i] != w0) ok = false; } }
    all_ok = all_ok && ok && got == expect;
    printf("hidden %d grid %d: wpr %d %d %d %d parts expected %ld covered %ld steps %ld ok %d\n", sh.hidden, grid, stv[0].wpr, stv[1].wpr, stv[2].wpr, stv[3].wpr, expect, got, steps, ok);
  }
  return all_ok ? 0 : 1;
}
