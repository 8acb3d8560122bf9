#include "runtime/kernels/gemm.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include "runtime/kernels/parallel_loop.h"
#include "runtime/kernels/thread_pool.h"

// The vector helpers below pass vectors wider than the file's baseline ISA by value; they are
// always inlined into the per-ISA entry functions, so no call ever uses that ABI.
#pragma clang diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wpsabi"

namespace refjit::kernels {

namespace {

// ---- vectors -----------------------------------------------------------------------------
// GCC/Clang vector types. The kernels are templates over them, inlined into one entry
// function per instruction set (target attributes below), so each copy is compiled for its
// CPU features and the CPU picks one at run time.

template <class T, int W>
struct VecOf;
template <>
struct VecOf<float, 16> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct VecOf<float, 8> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VecOf<float, 4> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct VecOf<double, 8> {
  typedef double type __attribute__((vector_size(64)));
};
template <>
struct VecOf<double, 4> {
  typedef double type __attribute__((vector_size(32)));
};
template <>
struct VecOf<double, 2> {
  typedef double type __attribute__((vector_size(16)));
};
template <class T, int W>
using Vec = typename VecOf<T, W>::type;

template <class V, class T>
[[gnu::always_inline]] inline V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V, class T>
[[gnu::always_inline]] inline void store(T* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
template <class V, class T>
[[gnu::always_inline]] inline V splat(T x) {
  // Lane by lane, which compiles to one broadcast (`V{} + x` would add 0 first: x may be -0).
  V v;
  for (size_t lane = 0; lane < sizeof(V) / sizeof(T); ++lane) v[lane] = x;
  return v;
}

// The sum of a vector's lanes, halving the width each step (a fixed order).
template <class T, int W>
[[gnu::always_inline]] inline T lane_sum(Vec<T, W> v) {
  constexpr int kNarrowest = sizeof(T) == 4 ? 4 : 2;
  if constexpr (W > kNarrowest) {
    using H = Vec<T, W / 2>;
    H lo, hi;
    std::memcpy(&lo, &v, sizeof lo);
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
    return lane_sum<T, W / 2>(lo + hi);
  } else {
    T s = v[0];
    for (int l = 1; l < W; ++l) s += v[l];
    return s;
  }
}

// lane_sum of each of four vectors. For 16 floats (AVX-512) the halving steps of the four are
// done together, two rows per shuffle, with each lane added in lane_sum's order: a row's sum
// has the same bits whether it is reduced alone or in a group.
template <class T, int W>
[[gnu::always_inline]] inline void lane_sums4(Vec<T, W> v0, Vec<T, W> v1, Vec<T, W> v2,
                                              Vec<T, W> v3, T out[4]) {
  if constexpr (std::is_same_v<T, float> && W == 16) {
    using V = Vec<float, 16>;
    using Q = Vec<float, 4>;
    // Eight lanes: lanes [0, 8) of each row plus lanes [8, 16), two rows per vector.
    const V h01 =
        __builtin_shufflevector(v0, v1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
        __builtin_shufflevector(v0, v1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30,
                                31);
    const V h23 =
        __builtin_shufflevector(v2, v3, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
        __builtin_shufflevector(v2, v3, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30,
                                31);
    // Four lanes: lanes [0, 4) of each row's eight plus lanes [4, 8); row r at [4r, 4r + 4).
    const V q = __builtin_shufflevector(h01, h23, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25,
                                        26, 27) +
                __builtin_shufflevector(h01, h23, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28,
                                        29, 30, 31);
    // ((l0 + l1) + l2) + l3 per row, the four rows side by side.
    const Q sums =
        ((__builtin_shufflevector(q, q, 0, 4, 8, 12) + __builtin_shufflevector(q, q, 1, 5, 9, 13)) +
         __builtin_shufflevector(q, q, 2, 6, 10, 14)) +
        __builtin_shufflevector(q, q, 3, 7, 11, 15);
    std::memcpy(out, &sums, sizeof sums);
  } else {
    out[0] = lane_sum<T, W>(v0);
    out[1] = lane_sum<T, W>(v1);
    out[2] = lane_sum<T, W>(v2);
    out[3] = lane_sum<T, W>(v3);
  }
}

// ---- transposing packs (AVX-512 and AVX2 floats) ------------------------------------------------
// Packing a row-major A (or a column-major B) is a transpose. One float at a time it cost as
// much as the product for shapes that reuse each packed panel a few times; 16 x 16 blocks
// transposed in registers take 64 shuffles for 256 floats instead of 256 loads and stores.

using F16 = Vec<float, 16>;

// One stage of the transpose: rows i and i + d exchange the d-blocks where the row's bit d
// and the lane's bit d differ. After the stages for d = 8, 4, 2, 1 row q holds column q.
#define REFJIT_TRANSPOSE_STAGE(D, LO, HI)         \
  for (int i = 0; i < 16; ++i) {                  \
    if (i & D) continue;                          \
    const F16 a = r[i], b = r[i + D];             \
    r[i] = __builtin_shufflevector(a, b, LO);     \
    r[i + D] = __builtin_shufflevector(a, b, HI); \
  }
#define REFJIT_LIST(...) __VA_ARGS__

// r[q][l] becomes the old r[l][q].
[[gnu::always_inline]] inline void transpose16x16(F16 r[16]) {
  REFJIT_TRANSPOSE_STAGE(8, REFJIT_LIST(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                         REFJIT_LIST(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31))
  REFJIT_TRANSPOSE_STAGE(4, REFJIT_LIST(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                         REFJIT_LIST(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31))
  REFJIT_TRANSPOSE_STAGE(2, REFJIT_LIST(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                         REFJIT_LIST(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31))
  REFJIT_TRANSPOSE_STAGE(1, REFJIT_LIST(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                         REFJIT_LIST(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31))
}
#undef REFJIT_LIST
#undef REFJIT_TRANSPOSE_STAGE

// The same for 8 x 8 floats (AVX2 registers): stages d = 4, 2, 1.
using F8 = Vec<float, 8>;
[[gnu::always_inline]] inline void transpose8x8(F8 r[8]) {
  for (int i = 0; i < 4; ++i) {
    const F8 a = r[i], b = r[i + 4];
    r[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11);
    r[i + 4] = __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15);
  }
  for (int i : {0, 1, 4, 5}) {
    const F8 a = r[i], b = r[i + 2];
    r[i] = __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13);
    r[i + 2] = __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int i : {0, 2, 4, 6}) {
    const F8 a = r[i], b = r[i + 1];
    r[i] = __builtin_shufflevector(a, b, 0, 8, 2, 10, 4, 12, 6, 14);
    r[i + 1] = __builtin_shufflevector(a, b, 1, 9, 3, 11, 5, 13, 7, 15);
  }
}

// dst[q * stride + r] = src[r * rs + q] for q < kc, r < rows (rows <= 16); lanes of rows at or
// past `rows` are written as zeros when they are below `width` (<= 16, the panel's part this
// call fills). Whole 16-deep blocks go through registers, the rest one float at a time.
template <int B = 16>
[[gnu::always_inline]] inline void transpose_rows(const float* src, int64_t rs, int rows,
                                                  int64_t kc, float* dst, int64_t stride,
                                                  int width) {
  using R = Vec<float, B>;
  int64_t q0 = 0;
  for (; q0 + B <= kc; q0 += B) {
    R r[B];
    for (int i = 0; i < B; ++i) r[i] = i < rows ? load<R>(src + i * rs + q0) : R{};
    if constexpr (B == 16)
      transpose16x16(r);
    else
      transpose8x8(r);
    for (int q = 0; q < B; ++q) std::memcpy(dst + (q0 + q) * stride, &r[q], width * sizeof(float));
  }
  for (int64_t q = q0; q < kc; ++q)
    for (int i = 0; i < width; ++i) dst[q * stride + i] = i < rows ? src[i * rs + q] : 0.0f;
}

// ---- blocking ----------------------------------------------------------------------------
// Depth of a packed block (a micro-panel of B and one of A stay in L1 together while A's
// micro-panels pass over B's) is per instruction set (KC of Blocked, at most kMaxKC); rows of
// a packed A block (in L2) and columns of a packed B panel (in L3). Measured; see
// docs/backend.md "Matrix products".
constexpr int64_t kMaxKC = 256;
constexpr int64_t kMC = 168;
constexpr int64_t kNC = 1536;
// A product with at most this many panels of NR columns reads row-major A in place (five:
// a 3x3 convolution over 16 channels has 144 = 4.5 panels of 32).
constexpr int64_t kInPlaceAPanels = 5;
// A row-major B whose rows are a multiple of this many bytes apart (256 or 512 floats wide)
// puts a panel's rows in at most 4 of an L1's 64 sets, so a panel read in place evicts itself
// while the micro-panels of A pass over it. Read in place only when few rows reuse it (at most
// kAliasedInPlaceRows); otherwise packed. Measured on an AVX2 machine (32 KiB, 8-way L1),
// each call alternating the two choices: a 256 x 784 by 784 x 512 product on two threads
// 106-119 -> 129-162 GFLOP/s, 128 rows +15-22%, 64 rows and fewer even (docs/backend.md).
constexpr int64_t kSetAliasingStrideBytes = 1024;
constexpr int64_t kAliasedInPlaceRows = 64;

// Below this many multiply-adds a product runs on one thread (waking workers costs more).
constexpr int64_t kParallelWork = int64_t{1} << 21;
// Multiply-adds from which a product is milliseconds of work (JobLength, thread_pool.h).
constexpr int64_t kLongJobWork = int64_t{1} << 26;

JobLength job_length(int64_t work) {
  return work >= kLongJobWork ? JobLength::milliseconds : JobLength::short_or_unknown;
}

// Calls the epilogue on rows [lo, hi) (it is JIT-compiled code: see REFJIT_CALLS_JIT_CODE).
REFJIT_CALLS_JIT_CODE inline void run_epilogue(const Epilogue& e, int64_t lo, int64_t hi) {
  e.fn(e.ctx, lo, hi);
}

// One matrix of the batch: A (m x k), B (k x n), C (m x n) with their strides.
template <class T>
struct Product {
  int64_t m, n, k;
  const T* a;
  int64_t a_rs, a_cs;
  const T* b;
  int64_t b_rs, b_cs;
  T* c;
  int64_t c_rs, c_cs;
  bool accumulate;  // C += A B instead of C = A B
  // Run on whole rows as soon as they are final (a consumer of the product while its rows
  // are in cache); row i of this matrix is row `first_row + i` of the epilogue's.
  Epilogue epilogue;
  int64_t first_row;
  // When set, A is the transpose of this implicit im2col's matrix (a_rs and a_cs unused): row i
  // of A is depth i of the im2col, depth p its row p (a convolution kernel's gradient).
  const Im2colGeometry* a_patches = nullptr;

  // Whether `block` (rows [i0, i1), columns [j0, j1)) calls the epilogue itself: only when
  // it computes whole rows.
  bool epilogue_in_block(int64_t j0, int64_t j1) const { return epilogue.fn && j0 == 0 && j1 == n; }
};

// A product whose A is read through the geometry of an implicit im2col (refjit/ir/im2col.h):
// element (i, p) of A is at a + row_offset(i) + run_offsets[p / run_len] + p % run_len. The
// rows come in segments of seg_len rows, row_stride apart inside a segment (a convolution's
// output row); run_offsets lists where each run of run_len contiguous depths starts (a
// window's channels, or a kernel row's windows side by side).
template <class T>
struct PatchProduct {
  int64_t n, k;
  const T* a;
  int64_t seg_len, row_stride;
  const int64_t* seg_offsets;
  int64_t run_len;
  const int64_t* run_offsets;
  const T* b;
  int64_t b_rs, b_cs;
  T* c;  // row r of the product (segment r / seg_len) at c + r * c_rs
  int64_t c_rs, c_cs;
  Epilogue epilogue;  // run on rows of C as soon as they are final
};

// The packed copies of A and B a thread works on (reused from call to call).
template <class T>
T* scratch_a() {
  thread_local std::vector<T> buffer(static_cast<size_t>(kMC * kMaxKC));
  return buffer.data();
}
template <class T>
T* scratch_b() {
  thread_local std::vector<T> buffer(static_cast<size_t>(kMaxKC * kNC));
  return buffer.data();
}

// The BLIS scheme for one instruction set: W lanes per vector, an MR x (NV * W) micro-tile,
// depth blocks of at most KC.
template <class T, int W, int MR, int NV, int64_t KC>
struct Blocked {
  static_assert(KC <= kMaxKC);
  using V = Vec<T, W>;
  static constexpr int NR = W * NV;
  // Row counts of the smaller micro-kernels a ragged last panel of rows uses.
  static constexpr int kMidRows = MR > 8 ? 8 : MR;
  static constexpr int kFewRows = MR > 4 ? 4 : MR;

  // The rows of the panel that starts `ir` rows into a block of `mc`: MR, but a ragged last
  // one. With `halves`, last MR + r rows that fit two kMidRows kernels (r of 1 or 2 with
  // AVX-512's 14 rows) are two halves: a product of 16 rows (the LSTM's batch) multiplies
  // 8 + 8 rows, where 14 + 2 multiplied 14 + 4 (the kFewRows kernel, two rows of zeros).
  static int64_t panel_rows(int64_t mc, int64_t ir, bool halves) {
    const int64_t left = mc - ir;
    if (halves && MR > kMidRows && left > MR && left <= 2 * kMidRows) return left - left / 2;
    return std::min<int64_t>(MR, left);
  }

  // The row count of the micro-kernel that multiplies a panel of `rows` rows.
  static int kernel_rows(int64_t rows) {
    return rows > kMidRows ? MR : rows > kFewRows ? kMidRows : kFewRows;
  }

  // A block of A (rows i0.., depth p0..) as micro-panels of MR rows: pa[panel][p][i],
  // zero-padded to a whole panel.
  [[gnu::always_inline]] static inline void pack_a(const Product<T>& x, int64_t i0, int64_t mc,
                                                   int64_t p0, int64_t kc, T* pa) {
    if (x.a_patches) {
      pack_a_patches(*x.a_patches, x.a, i0, mc, p0, kc, pa);
      return;
    }
    if (x.a_rs == 1) {
      // A transposed A: each depth's row segment is contiguous in memory, read once, front to
      // back, and dealt out to the panels (a memory-bound copy wants sequential reads).
      const int64_t whole = mc / MR * MR;
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = x.a + i0 + (p0 + p) * x.a_cs;
        for (int64_t ir = 0; ir < whole; ir += MR)
          std::memcpy(pa + ir * kc + p * MR, src + ir, MR * sizeof(T));
      }
      if (whole == mc) return;
      pa += whole * kc;
      i0 += whole;
      mc -= whole;
    }
    if constexpr (std::is_same_v<T, float> && (W == 16 || W == 8) && MR <= W) {
      if (x.a_cs == 1) {  // a row-major A: each panel a transpose of MR rows
        for (int64_t ir = 0; ir < mc; ir += MR) {
          const int rows = static_cast<int>(std::min<int64_t>(MR, mc - ir));
          transpose_rows<W>(x.a + (i0 + ir) * x.a_rs + p0, x.a_rs, rows, kc, pa, MR, MR);
          pa += MR * kc;
        }
        return;
      }
    }
    for (int64_t ir = 0; ir < mc; ir += MR) {
      const int64_t rows = std::min<int64_t>(MR, mc - ir);
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = x.a + (i0 + ir) * x.a_rs + (p0 + p) * x.a_cs;
        // (A fixed trip count: a variable-length zero fill became a memset call per depth.)
        for (int i = 0; i < MR; ++i) pa[i] = i < rows ? src[i * x.a_rs] : T(0);
        pa += MR;
      }
    }
  }

  // pack_a for the transpose of an implicit im2col (Product::a_patches): each im2col row is
  // read once, front to back, and dealt out to the panels. A panel's MR depths are one copy
  // when they lie in one run; otherwise its pieces, one per run, are worked out once.
  [[gnu::always_inline]] static inline void pack_a_patches(const Im2colGeometry& g, const T* a,
                                                           int64_t i0, int64_t mc, int64_t p0,
                                                           int64_t kc, T* pa) {
    struct Piece {
      int64_t dst, src, len;
    };
    constexpr int64_t kMaxPanels = (kMC + MR - 1) / MR;
    int64_t whole_src[kMaxPanels];  // -1: the panel is copied in pieces
    std::vector<Piece> pieces;
    for (int64_t ir = 0, panel = 0; ir < mc; ir += MR, ++panel) {
      const int64_t rows = std::min<int64_t>(MR, mc - ir);
      const int64_t first = i0 + ir, run = first / g.run_len, within = first % g.run_len;
      whole_src[panel] = rows == MR && within + MR <= g.run_len ? g.run_offsets[run] + within : -1;
      if (whole_src[panel] >= 0) continue;
      for (int64_t i = 0; i < rows;) {
        const int64_t d = first + i, r = d / g.run_len, w = d % g.run_len;
        const int64_t len = std::min(g.run_len - w, rows - i);
        pieces.push_back({ir * kc + i, g.run_offsets[r] + w, len});
        i += len;
      }
      if (rows < MR) pieces.push_back({ir * kc + rows, -1, MR - rows});  // zeros
    }
    for (int64_t p = 0; p < kc; ++p) {
      const int64_t row = p0 + p, seg = row / g.seg_len;
      const T* src = a + g.seg_offsets[seg] + (row - seg * g.seg_len) * g.row_stride;
      for (int64_t ir = 0, panel = 0; ir < mc; ir += MR, ++panel)
        if (whole_src[panel] >= 0)
          std::memcpy(pa + ir * kc + p * MR, src + whole_src[panel], MR * sizeof(T));
      for (const Piece& c : pieces) {
        T* dst = pa + c.dst + p * MR;
        if (c.src < 0)
          std::fill(dst, dst + c.len, T(0));
        else
          std::copy(src + c.src, src + c.src + c.len, dst);
      }
    }
  }

  // A panel of B (depth p0.., columns j0..) as micro-panels of NR columns: pb[panel][p][j].
  [[gnu::always_inline]] static inline void pack_b(const Product<T>& x, int64_t p0, int64_t kc,
                                                   int64_t j0, int64_t nc, T* pb) {
    if constexpr (std::is_same_v<T, float> && (W == 16 || W == 8)) {
      if (x.b_rs == 1 && x.b_cs != 1) {  // a column-major B: each panel a transpose
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int64_t cols = std::min<int64_t>(NR, nc - jr);
          for (int h = 0; h < NR; h += W) {  // W columns at a time
            const int rows = static_cast<int>(std::clamp<int64_t>(cols - h, 0, W));
            transpose_rows<W>(x.b + p0 + (j0 + jr + h) * x.b_cs, x.b_cs, rows, kc, pb + h, NR, W);
          }
          pb += NR * kc;
        }
        return;
      }
    }
    for (int64_t jr = 0; jr < nc; jr += NR) {
      const int64_t cols = std::min<int64_t>(NR, nc - jr);
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = x.b + (p0 + p) * x.b_rs + (j0 + jr) * x.b_cs;
        int64_t j = 0;
        if (x.b_cs == 1 && cols == NR) {
          std::memcpy(pb, src, NR * sizeof(T));  // a constant size: vector moves, no call
          j = cols;
        } else if (x.b_cs == 1) {
          std::memcpy(pb, src, static_cast<size_t>(cols) * sizeof(T));
          j = cols;
        } else {
          for (; j < cols; ++j) pb[j] = src[j * x.b_cs];
        }
        for (; j < NR; ++j) pb[j] = T(0);
        pb += NR;
      }
    }
  }

  // C's MR x NR tile (row stride c_rs, contiguous rows) = or += the product of MR rows of A
  // and NR columns of B over depth kc; B's rows are b_rs apart (NR when packed). A is a packed
  // micro-panel, or with kRowsOfA MR rows read in place (a_rs apart, each contiguous). The
  // accumulators stay in registers.
  // Only the first R rows are computed (R < MR for a ragged last panel of rows).
  template <int R, bool kRowsOfA>
  [[gnu::always_inline]] static inline void micro(int64_t kc, const T* pa, int64_t a_rs,
                                                  const T* pb, int64_t b_rs, T* c, int64_t c_rs,
                                                  bool add) {
    prefetch_tile<R>(c, c_rs);
    V acc[R][NV] = {};
    for (int64_t p = 0; p < kc; ++p) {
      V b[NV];
      for (int j = 0; j < NV; ++j) b[j] = load<V>(pb + j * W);
      for (int i = 0; i < R; ++i) {
        const V a = splat<V>(kRowsOfA ? pa[i * a_rs] : pa[i]);
        for (int j = 0; j < NV; ++j) acc[i][j] += a * b[j];
      }
      pa += kRowsOfA ? 1 : MR;
      pb += b_rs;
    }
    store_tile<R>(acc, c, c_rs, add);
  }

  // C's tile is read and written only after the depth loop, and a large C is not in cache:
  // the loads missed there took 15% of a 1024^3 product. Ask for its lines now, so they
  // arrive while the loop multiplies.
  template <int R>
  [[gnu::always_inline]] static inline void prefetch_tile(T* c, int64_t c_rs) {
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NR; j += 64 / static_cast<int>(sizeof(T)))
        __builtin_prefetch(c + i * c_rs + j, 1, 3);
  }

  // Unrolled, like the depth loops: otherwise GCC spills the accumulators to the stack (and
  // zeroes that copy with a memset) to run this as a loop, 10-15% of a 1024^3 product.
  template <int R>
  [[gnu::always_inline]] static inline void store_tile(V (&acc)[R][NV], T* c, int64_t c_rs,
                                                       bool add) {
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        T* dst = c + i * c_rs + j * W;
        store(dst, add ? load<V>(dst) + acc[i][j] : acc[i][j]);
      }
  }

  // micro<R, true> for an implicit im2col: R rows of A read in place, a_rs apart from a_row,
  // over depths [p0, p0 + kc), which may cross runs (each a contiguous stretch of the rows).
  template <int R>
  [[gnu::always_inline]] static inline void micro_runs(const T* a_row, int64_t a_rs,
                                                       int64_t run_len, const int64_t* run_offsets,
                                                       int64_t p0, int64_t kc, const T* pb, T* c,
                                                       int64_t c_rs, bool add) {
    prefetch_tile<R>(c, c_rs);
    V acc[R][NV] = {};
    for (int64_t p = p0, end = p0 + kc; p < end;) {
      const int64_t run = p / run_len, within = p - run * run_len;
      const int64_t len = std::min(run_len - within, end - p);
      const T* pa = a_row + run_offsets[run] + within;
      for (int64_t q = 0; q < len; ++q) {
        V b[NV];
        for (int j = 0; j < NV; ++j) b[j] = load<V>(pb + j * W);
        for (int i = 0; i < R; ++i) {
          const V a = splat<V>(pa[i * a_rs]);
          for (int j = 0; j < NV; ++j) acc[i][j] += a * b[j];
        }
        ++pa;
        pb += NR;
      }
      p += len;
    }
    store_tile<R>(acc, c, c_rs, add);
  }

  // Rows [r, r + rows) of one segment (rows < MR) as one packed micro-panel, zero-padded.
  [[gnu::always_inline]] static inline void pack_gathered(const PatchProduct<T>& x, const T* a_row,
                                                          int rows, int64_t p0, int64_t kc, T* pa) {
    // Run by run, as micro_runs reads them (no division per depth).
    for (int64_t p = p0, end = p0 + kc; p < end;) {
      const int64_t run = p / x.run_len, within = p - run * x.run_len;
      const int64_t len = std::min(x.run_len - within, end - p);
      const T* src = a_row + x.run_offsets[run] + within;
      for (int64_t q = 0; q < len; ++q, pa += MR)
        for (int i = 0; i < MR; ++i) pa[i] = i < rows ? src[q + i * x.row_stride] : T(0);
      p += len;
    }
  }

  // The tile of rows [row, row + rows) and columns [jr, jr + cols) of C, written from a
  // local tile when it is partial or strided.
  [[gnu::always_inline]] static inline void finish_tile(const T* edge, T* c, int64_t c_rs,
                                                        int64_t c_cs, int64_t rows, int64_t cols,
                                                        bool add) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        T& out = c[i * c_rs + j * c_cs];
        out = add ? out + edge[i * NR + j] : edge[i * NR + j];
      }
  }

  // A micro-panel of one segment's rows: read in place (MR, kMidRows or kFewRows rows), or
  // packed (fewer than kFewRows rows, multiplied as kFewRows).
  struct RowPanel {
    int rows;
    bool packed;
  };

  // How a segment of seg_len rows is cut into micro-panels, largest first, at the least cost
  // counted in rows multiplied, plus one per panel (its tile's loads and stores), plus three
  // for a packed panel (its rows gathered one float at a time): 32 rows on AVX2 are
  // 4 x 6 + 2 x 4, not 5 x 6 and two rows packed, a twentieth of the convolution's rows
  // gathered and multiplied with padding.
  static std::vector<RowPanel> segment_panels(int64_t seg_len) {
    constexpr int kSizes[] = {MR, kMidRows, kFewRows};
    constexpr int64_t kUnreachable = std::numeric_limits<int64_t>::max() / 4;
    std::vector<int64_t> cost(static_cast<size_t>(seg_len + 1), kUnreachable);
    std::vector<int> last(static_cast<size_t>(seg_len + 1), 0);  // the panel ending at n rows
    cost[0] = 0;
    for (int64_t n = 1; n <= seg_len; ++n)
      for (int r : kSizes)
        if (r <= n && cost[n - r] + r + 1 < cost[n]) {
          cost[n] = cost[n - r] + r + 1;
          last[n] = r;
        }
    int64_t best = cost[seg_len];
    int packed_rows = 0;  // rows left to one packed panel
    for (int r = 1; r < kFewRows && r <= seg_len; ++r)
      if (cost[seg_len - r] + kFewRows + 1 + 3 < best) {
        best = cost[seg_len - r] + kFewRows + 1 + 3;
        packed_rows = r;
      }
    std::vector<RowPanel> panels;
    for (int64_t n = seg_len - packed_rows; n > 0; n -= last[n]) panels.push_back({last[n], false});
    std::sort(panels.begin(), panels.end(),
              [](const RowPanel& a, const RowPanel& b) { return a.rows > b.rows; });
    if (packed_rows > 0) panels.push_back({packed_rows, true});
    return panels;
  }

  // Segments [s0, s1) of an implicit-im2col product (PatchProduct). Each segment's rows are
  // cut into micro-panels that stay inside it (segment_panels), so every panel but a last
  // packed one reads A in place with one row stride.
  [[gnu::always_inline]] static inline void run_patches(const PatchProduct<T>& x, int64_t s0,
                                                        int64_t s1) {
    const std::vector<RowPanel> panels = segment_panels(x.seg_len);
    T* pa = scratch_a<T>();
    T* pb = scratch_b<T>();
    T edge[MR * NR];
    Product<T> bx{};
    bx.b = x.b;
    bx.b_rs = x.b_rs;
    bx.b_cs = x.b_cs;
    const int64_t depth_blocks = (x.k + KC - 1) / KC;
    const int64_t depth_block = (x.k + depth_blocks - 1) / depth_blocks;
    // Segments a few at a time, so that their rows of C stay in cache across depth blocks.
    const int64_t chunk = std::max<int64_t>(1, kMC / x.seg_len);
    for (int64_t sc = s0; sc < s1; sc += chunk) {
      const int64_t sc1 = std::min(s1, sc + chunk);
      for (int64_t jc = 0; jc < x.n; jc += kNC) {
        const int64_t nc = std::min(kNC, x.n - jc);
        for (int64_t pc = 0; pc < x.k; pc += depth_block) {
          const int64_t kc = std::min(depth_block, x.k - pc);
          const bool add = pc > 0;
          pack_b(bx, pc, kc, jc, nc, pb);
          for (int64_t seg = sc; seg < sc1; ++seg) {
            const T* seg_a = x.a + x.seg_offsets[seg];
            int64_t ir = 0;
            for (const RowPanel& panel : panels) {
              const int rows = panel.rows;
              const T* a_row = seg_a + ir * x.row_stride;
              const bool packed = panel.packed;
              if (packed) pack_gathered(x, a_row, rows, pc, kc, pa);
              T* c_rows = x.c + (seg * x.seg_len + ir) * x.c_rs;
              for (int64_t jr = 0; jr < nc; jr += NR) {
                const int64_t cols = std::min<int64_t>(NR, nc - jr);
                const T* b_panel = pb + jr * kc;
                T* c = c_rows + (jc + jr) * x.c_cs;
                const bool whole_tile = cols == NR && x.c_cs == 1 && !packed;
                T* dst = whole_tile ? c : edge;
                const int64_t dst_rs = whole_tile ? x.c_rs : NR;
                const bool accumulate = whole_tile && add;
                if (packed)
                  micro<kFewRows, false>(kc, pa, 0, b_panel, NR, dst, dst_rs, accumulate);
                else if (rows == MR)
                  micro_runs<MR>(a_row, x.row_stride, x.run_len, x.run_offsets, pc, kc, b_panel,
                                 dst, dst_rs, accumulate);
                else if (rows == kMidRows)
                  micro_runs<kMidRows>(a_row, x.row_stride, x.run_len, x.run_offsets, pc, kc,
                                       b_panel, dst, dst_rs, accumulate);
                else
                  micro_runs<kFewRows>(a_row, x.row_stride, x.run_len, x.run_offsets, pc, kc,
                                       b_panel, dst, dst_rs, accumulate);
                if (!whole_tile) finish_tile(edge, c, x.c_rs, x.c_cs, rows, cols, add);
              }
              ir += rows;
            }
          }
        }
      }
      if (x.epilogue.fn) run_epilogue(x.epilogue, sc * x.seg_len, sc1 * x.seg_len);
    }
  }

  // Rows [i0, i1) and columns [j0, j1) of C.
  [[gnu::always_inline]] static inline void run(const Product<T>& x, int64_t i0, int64_t i1,
                                                int64_t j0, int64_t j1) {
    T* pa = scratch_a<T>();
    T* pb = scratch_b<T>();
    T edge[MR * NR];
    for (int64_t jc = j0; jc < j1; jc += kNC) {
      const int64_t nc = std::min(kNC, j1 - jc);
      // Depth blocks of equal size, at most KC: 784 = 5 x ~157 rather than 4 x 192 + 16 (a
      // last block that thin spends more on loading and storing C than on multiplying).
      const int64_t depth_blocks = (x.k + KC - 1) / KC;
      const int64_t depth_block = (x.k + depth_blocks - 1) / depth_blocks;
      for (int64_t pc = 0; pc < x.k; pc += depth_block) {
        const int64_t kc = std::min(depth_block, x.k - pc);
        const bool add = pc > 0 || x.accumulate;
        // With one or two blocks of rows, packing B buys nothing (each of its panels is read
        // once or twice, and the copy costs a read and a write): whole panels of a row-major B
        // are read in place, only a ragged last one is packed. (Two blocks: 256-row products
        // ran ~4% faster on an AVX-512 machine.) Not when B's rows alias in L1 and more than a
        // few rows reuse each panel (kSetAliasingStrideBytes).
        const bool b_rows_alias = x.b_rs * int64_t{sizeof(T)} % kSetAliasingStrideBytes == 0;
        const bool direct =
            i1 - i0 <= (b_rows_alias ? kAliasedInPlaceRows : 2 * kMC) && x.b_cs == 1;
        const int64_t packed_from = direct ? nc / NR * NR : 0;
        if (packed_from < nc) pack_b(x, pc, kc, jc + packed_from, nc - packed_from, pb);
        // Likewise with few columns (a convolution's im2col times its kernel): each micro-panel
        // of A would be read only a few times, and packing a row-major A is a transpose that
        // costs as much as the product. Its whole panels of rows are read in place instead.
        const bool a_rows_in_place = x.a_cs == 1 && nc <= kInPlaceAPanels * NR;
        for (int64_t ic = i0; ic < i1; ic += kMC) {
          const int64_t mc = std::min(kMC, i1 - ic);
          const int64_t a_packed_from = a_rows_in_place ? mc / MR * MR : 0;
          // Packed panels may end in two halves (panel_rows); panels read in place are whole.
          const bool halves = a_packed_from == 0 && !x.a_patches;
          if (halves) {
            // Each packed panel MR * kc values, zero-padded: whole ones at once, halves alone.
            int64_t ir = 0, panel = 0;
            while (ir < mc && panel_rows(mc, ir, halves) == MR) ir += MR, ++panel;
            if (ir > 0) pack_a(x, ic, ir, pc, kc, pa);
            for (int64_t rows = 0; ir < mc; ir += rows, ++panel) {
              rows = panel_rows(mc, ir, halves);
              pack_a(x, ic + ir, rows, pc, kc, pa + panel * MR * kc);
            }
          } else if (a_packed_from < mc) {
            pack_a(x, ic + a_packed_from, mc - a_packed_from, pc, kc, pa);
          }
          for (int64_t jr = 0; jr < nc; jr += NR) {
            const int64_t cols = std::min<int64_t>(NR, nc - jr);
            for (int64_t ir = 0, panel = 0, rows = 0; ir < mc; ir += rows, ++panel) {
              rows = panel_rows(mc, ir, halves);
              const bool a_in_place = ir < a_packed_from;
              const T* a_panel = a_in_place ? x.a + (ic + ir) * x.a_rs + pc
                                            : pa + (panel - a_packed_from / MR) * MR * kc;
              const bool in_place = jr < packed_from;
              const T* b_panel =
                  in_place ? x.b + pc * x.b_rs + jc + jr : pb + (jr - packed_from) * kc;
              const int64_t b_rs = in_place ? x.b_rs : NR;
              T* c = x.c + (ic + ir) * x.c_rs + (jc + jr) * x.c_cs;
              // (No lambda here: it would not inherit the entry function's target attribute.)
              const bool whole_tile = rows == kernel_rows(rows) && cols == NR && x.c_cs == 1;
              T* dst = whole_tile ? c : edge;
              const int64_t dst_rs = whole_tile ? x.c_rs : NR;
              const bool accumulate = whole_tile && add;
              if (a_in_place)  // whole panels only
                micro<MR, true>(kc, a_panel, x.a_rs, b_panel, b_rs, dst, dst_rs, accumulate);
              else if (rows > kMidRows)
                micro<MR, false>(kc, a_panel, 0, b_panel, b_rs, dst, dst_rs, accumulate);
              else if (rows > kFewRows)  // a ragged last panel: fewer rows, less work
                micro<kMidRows, false>(kc, a_panel, 0, b_panel, b_rs, dst, dst_rs, accumulate);
              else
                micro<kFewRows, false>(kc, a_panel, 0, b_panel, b_rs, dst, dst_rs, accumulate);
              // A partial or strided tile went through a local one.
              if (!whole_tile) finish_tile(edge, c, x.c_rs, x.c_cs, rows, cols, add);
            }
          }
          // The last depth block of the last column block: rows [ic, ic + mc) are final.
          if (pc + kc >= x.k && jc + nc >= j1 && x.epilogue_in_block(j0, j1))
            run_epilogue(x.epilogue, x.first_row + ic, x.first_row + ic + mc);
        }
      }
    }
  }
};

// y[i * ys] = sum_p A[i, p] x[p] for rows [i0, i1), x contiguous.
template <class T, int W>
[[gnu::always_inline]] inline void matvec(const T* a, int64_t a_rs, int64_t a_cs, const T* x,
                                          int64_t k, T* y, int64_t ys, int64_t i0, int64_t i1,
                                          bool accumulate) {
  using V = Vec<T, W>;
  if (a_cs == 1) {
    // Rows contiguous: a dot product per row, in one order whether the row is done alone or in
    // a group: one vector accumulator over the whole vectors, its lane_sum, then the tail.
    // Groups of four rows give four independent accumulators and share x's loads and the lane
    // sums' shuffles (an RNN step's 128-long rows spent most of their time in the lane sums).
    // (No lambdas here: they would not inherit the entry function's target attribute.)
    const int64_t whole = k / W * W;
    int64_t i = i0;
    for (; i + 4 <= i1; i += 4) {
      const T* r0 = a + i * a_rs;
      const T* r1 = r0 + a_rs;
      const T* r2 = r1 + a_rs;
      const T* r3 = r2 + a_rs;
      V acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {};
      for (int64_t p = 0; p < whole; p += W) {
        const V xp = load<V>(x + p);
        acc0 += load<V>(r0 + p) * xp;
        acc1 += load<V>(r1 + p) * xp;
        acc2 += load<V>(r2 + p) * xp;
        acc3 += load<V>(r3 + p) * xp;
      }
      T s[4];
      lane_sums4<T, W>(acc0, acc1, acc2, acc3, s);
      for (int r = 0; r < 4; ++r) {
        const T* row = a + (i + r) * a_rs;
        for (int64_t p = whole; p < k; ++p) s[r] += row[p] * x[p];
        T& out = y[(i + r) * ys];
        out = accumulate ? out + s[r] : s[r];
      }
    }
    for (; i < i1; ++i) {
      const T* row = a + i * a_rs;
      V acc = {};
      for (int64_t p = 0; p < whole; p += W) acc += load<V>(row + p) * load<V>(x + p);
      T s = lane_sum<T, W>(acc);
      for (int64_t p = whole; p < k; ++p) s += row[p] * x[p];
      y[i * ys] = accumulate ? y[i * ys] + s : s;
    }
    return;
  }
  // Columns contiguous: y[i..i+4W) += A[i.., p] x[p] over all p, the four vectors of y in
  // registers throughout.
  if (a_rs == 1 && ys == 1) {
    for (; i0 + 4 * W <= i1; i0 += 4 * W) {
      V acc[4] = {};
      for (int64_t p = 0; p < k; ++p) {
        const V xp = splat<V>(x[p]);
        const T* col = a + p * a_cs + i0;
        for (int u = 0; u < 4; ++u) acc[u] += load<V>(col + u * W) * xp;
      }
      for (int u = 0; u < 4; ++u)
        store(y + i0 + u * W, accumulate ? load<V>(y + i0 + u * W) + acc[u] : acc[u]);
    }
  }
  // The remaining rows (or a general layout): y += A[:, p] x[p], column after column.
  if (!accumulate)
    for (int64_t i = i0; i < i1; ++i) y[i * ys] = T(0);
  for (int64_t p = 0; p < k; ++p) {
    const T xp = x[p];
    const T* col = a + p * a_cs;
    if (a_rs == 1 && ys == 1) {
      int64_t i = i0;
      for (; i + W <= i1; i += W) store(y + i, load<V>(y + i) + load<V>(col + i) * splat<V>(xp));
      for (; i < i1; ++i) y[i] += col[i] * xp;
    } else {
      for (int64_t i = i0; i < i1; ++i) y[i * ys] += col[i * a_rs] * xp;
    }
  }
}

// C = A B over a depth of at most kShallowDepth (an outer product has depth 1), rows
// [i0, i1), with B's and C's rows contiguous: each row of C is a combination of B's k rows,
// a vector at a time in registers; packing would cost more than the product.
constexpr int64_t kShallowDepth = 8;

template <class T, int W>
[[gnu::always_inline]] inline void shallow(const Product<T>& x, int64_t i0, int64_t i1) {
  using V = Vec<T, W>;
  // Locals, not x's fields: the stores into C are byte copies, which may alias x, so the
  // fields would be loaded again for every vector.
  const int64_t n = x.n, k = x.k, a_cs = x.a_cs, b_rs = x.b_rs;
  const T* const b = x.b;
  const bool accumulate = x.accumulate;
  for (int64_t i = i0; i < i1; ++i) {
    const T* a = x.a + i * x.a_rs;
    T* c = x.c + i * x.c_rs;
    int64_t j = 0;
    if (k == 1) {  // an outer product (a gradient's rank-one update)
      const V a0 = splat<V>(a[0]);
      for (; j + W <= n; j += W) {
        const V prod = a0 * load<V>(b + j);
        store(c + j, accumulate ? load<V>(c + j) + prod : prod);
      }
    } else {
      for (; j + W <= n; j += W) {
        V acc = splat<V>(a[0]) * load<V>(b + j);
        for (int64_t p = 1; p < k; ++p) acc += splat<V>(a[p * a_cs]) * load<V>(b + p * b_rs + j);
        store(c + j, accumulate ? load<V>(c + j) + acc : acc);
      }
    }
    for (; j < n; ++j) {
      T s = a[0] * b[j];
      for (int64_t p = 1; p < k; ++p) s += a[p * a_cs] * b[p * b_rs + j];
      c[j] = accumulate ? c[j] + s : s;
    }
  }
}

// One instruction set's kernels, as plain function pointers.
template <class T>
struct Isa {
  const char* name;
  int mr, nr;
  void (*block)(const Product<T>&, int64_t, int64_t, int64_t, int64_t);
  // For products at most one vector wide (a convolution's 16 output channels): a micro-tile of
  // one vector's columns and twice the rows. The usual tile is two vectors wide, so such a
  // product left half of every multiply-add on padding.
  int narrow_mr, narrow_nr;
  void (*narrow_block)(const Product<T>&, int64_t, int64_t, int64_t, int64_t);
  void (*matvec)(const T*, int64_t, int64_t, const T*, int64_t, T*, int64_t, int64_t, int64_t,
                 bool);
  void (*shallow)(const Product<T>&, int64_t, int64_t);
  // Segments [s0, s1) of an implicit-im2col product, with the usual and the narrow tile.
  void (*patches)(const PatchProduct<T>&, int64_t, int64_t);
  void (*narrow_patches)(const PatchProduct<T>&, int64_t, int64_t);
};

#define REFJIT_ISA_ENTRIES(TARGET, SUFFIX, T, W, MR, NV, NARROW_MR, KC)                            \
  TARGET void block_##SUFFIX(const Product<T>& x, int64_t i0, int64_t i1, int64_t j0,              \
                             int64_t j1) {                                                         \
    Blocked<T, W, MR, NV, KC>::run(x, i0, i1, j0, j1);                                             \
  }                                                                                                \
  TARGET void narrow_block_##SUFFIX(const Product<T>& x, int64_t i0, int64_t i1, int64_t j0,       \
                                    int64_t j1) {                                                  \
    Blocked<T, W, NARROW_MR, 1, KC>::run(x, i0, i1, j0, j1);                                       \
  }                                                                                                \
  TARGET void matvec_##SUFFIX(const T* a, int64_t a_rs, int64_t a_cs, const T* x, int64_t k, T* y, \
                              int64_t ys, int64_t i0, int64_t i1, bool accumulate) {               \
    matvec<T, W>(a, a_rs, a_cs, x, k, y, ys, i0, i1, accumulate);                                  \
  }                                                                                                \
  TARGET void shallow_##SUFFIX(const Product<T>& x, int64_t i0, int64_t i1) {                      \
    shallow<T, W>(x, i0, i1);                                                                      \
  }                                                                                                \
  TARGET void patches_##SUFFIX(const PatchProduct<T>& x, int64_t s0, int64_t s1) {                 \
    Blocked<T, W, MR, NV, KC>::run_patches(x, s0, s1);                                             \
  }                                                                                                \
  TARGET void narrow_patches_##SUFFIX(const PatchProduct<T>& x, int64_t s0, int64_t s1) {          \
    Blocked<T, W, NARROW_MR, 1, KC>::run_patches(x, s0, s1);                                       \
  }

#define REFJIT_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma")))
#define REFJIT_AVX2 __attribute__((target("avx2,fma")))
#define REFJIT_SSE2

// The narrow tiles keep MR accumulators plus a vector of B and a broadcast of A in the
// registers: 28 + 2 of AVX-512's 32, 12 + 2 of AVX2's and SSE2's 16. (kMC, 168, is a multiple
// of every MR here.) KC: AVX-512's 14 x 32 float panels fill 35 KiB of a 48 KiB L1 at 192;
// AVX2's 6 x 16 float panels 22 KiB of a 32 KiB L1 at 256, which ran 2-4% faster than 192 on
// a Zen 3 core (each call alternating the two, five shapes, one and two threads). The other
// rows keep 192, not measured against another depth.
REFJIT_ISA_ENTRIES(REFJIT_AVX512, avx512_f32, float, 16, 14, 2, 28, 192)
REFJIT_ISA_ENTRIES(REFJIT_AVX512, avx512_f64, double, 8, 14, 2, 28, 192)
REFJIT_ISA_ENTRIES(REFJIT_AVX2, avx2_f32, float, 8, 6, 2, 12, 256)
REFJIT_ISA_ENTRIES(REFJIT_AVX2, avx2_f64, double, 4, 6, 2, 12, 192)
REFJIT_ISA_ENTRIES(REFJIT_SSE2, sse2_f32, float, 4, 4, 2, 12, 192)
REFJIT_ISA_ENTRIES(REFJIT_SSE2, sse2_f64, double, 2, 4, 2, 12, 192)

enum class Cpu { avx512, avx2, sse2 };

Cpu detect_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) return Cpu::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Cpu::avx2;
  return Cpu::sse2;
}

Cpu cpu() {
  static const Cpu c = detect_cpu();
  return c;
}

template <class T>
const Isa<T>& isa();
template <>
const Isa<float>& isa<float>() {
  static const Isa<float> table[] = {
      {"avx512", 14, 32, block_avx512_f32, 28, 16, narrow_block_avx512_f32, matvec_avx512_f32,
       shallow_avx512_f32, patches_avx512_f32, narrow_patches_avx512_f32},
      {"avx2", 6, 16, block_avx2_f32, 12, 8, narrow_block_avx2_f32, matvec_avx2_f32,
       shallow_avx2_f32, patches_avx2_f32, narrow_patches_avx2_f32},
      {"sse2", 4, 8, block_sse2_f32, 12, 4, narrow_block_sse2_f32, matvec_sse2_f32,
       shallow_sse2_f32, patches_sse2_f32, narrow_patches_sse2_f32}};
  return table[static_cast<int>(cpu())];
}
template <>
const Isa<double>& isa<double>() {
  static const Isa<double> table[] = {
      {"avx512", 14, 16, block_avx512_f64, 28, 8, narrow_block_avx512_f64, matvec_avx512_f64,
       shallow_avx512_f64, patches_avx512_f64, narrow_patches_avx512_f64},
      {"avx2", 6, 8, block_avx2_f64, 12, 4, narrow_block_avx2_f64, matvec_avx2_f64,
       shallow_avx2_f64, patches_avx2_f64, narrow_patches_avx2_f64},
      {"sse2", 4, 4, block_sse2_f64, 12, 2, narrow_block_sse2_f64, matvec_sse2_f64,
       shallow_sse2_f64, patches_sse2_f64, narrow_patches_sse2_f64}};
  return table[static_cast<int>(cpu())];
}

// [begin, end) of part `t` of `n` items split into `parts` pieces, in multiples of `grain`.
std::pair<int64_t, int64_t> part_of(int64_t n, int64_t parts, int64_t t, int64_t grain) {
  const int64_t units = (n + grain - 1) / grain;
  const int64_t begin = std::min(n, units * t / parts * grain);
  const int64_t end = std::min(n, units * (t + 1) / parts * grain);
  return {begin, end};
}

// y = A x (or y += A x) for one matrix (m x k), x with stride xs, y with stride ys.
template <class T>
void matvec_product(const Isa<T>& isa, int64_t m, int64_t k, const T* a, int64_t a_rs, int64_t a_cs,
                    const T* x, int64_t xs, T* y, int64_t ys, int64_t parts, bool accumulate) {
  std::vector<T> packed;
  if (xs != 1) {
    packed.resize(static_cast<size_t>(k));
    for (int64_t p = 0; p < k; ++p) packed[p] = x[p * xs];
    x = packed.data();
  }
  parts = std::min(parts, std::max<int64_t>(1, m / 16));
  parallel_for(parts, [&](int64_t t) {
    auto [i0, i1] = part_of(m, parts, t, 16);
    isa.matvec(a, a_rs, a_cs, x, k, y, ys, i0, i1, accumulate);
  });
}

// Rows of C handled per call of the shallow kernel, so that an epilogue finds them in cache.
constexpr int64_t kShallowRowBlock = 64;

// With `a_patches`, A is the transpose of that implicit im2col's matrix and `a` is its x (see
// Product::a_patches).
template <class T>
void gemm_impl(GemmShape s, Matrices<const T> a, Matrices<const T> b, Matrices<T> c,
               bool accumulate, Epilogue epilogue, const Im2colGeometry* a_patches = nullptr) {
  if (s.batch <= 0 || s.m <= 0 || s.n <= 0) return;
  if (s.k <= 0) {
    if (!accumulate)
      for (int64_t q = 0; q < s.batch; ++q)
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j)
            c.data[q * c.batch_stride + i * c.row_stride + j * c.col_stride] = T(0);
    if (epilogue.fn) run_epilogue(epilogue, 0, s.batch * s.m);
    return;
  }
  const Isa<T>& kernels = isa<T>();
  const int64_t work = s.batch * s.m * s.n * s.k;
  const int64_t threads = work < kParallelWork ? 1 : thread_count();

  if (!a_patches && (s.n == 1 || s.m == 1)) {  // matrix-vector: packing wastes all but one column
    for (int64_t q = 0; q < s.batch; ++q) {
      const T* aq = a.data + q * a.batch_stride;
      const T* bq = b.data + q * b.batch_stride;
      T* cq = c.data + q * c.batch_stride;
      if (s.n == 1)  // C[:, 0] = A B[:, 0]
        matvec_product(kernels, s.m, s.k, aq, a.row_stride, a.col_stride, bq, b.row_stride, cq,
                       c.row_stride, threads, accumulate);
      else  // C[0, :] = B^T A[0, :]
        matvec_product(kernels, s.n, s.k, bq, b.col_stride, b.row_stride, aq, a.col_stride, cq,
                       c.col_stride, threads, accumulate);
      if (epilogue.fn) run_epilogue(epilogue, q * s.m, (q + 1) * s.m);
    }
    return;
  }

  // Whole matrices per task when the batch fills the threads; else split each matrix's rows
  // or columns into one part per thread, or a few while some threads run slower than others
  // (thread_pool.h; each part packs the other operand whole, about 3% of a 1024 product).
  const JobLength length = job_length(work);
  const int64_t per_matrix = s.batch >= threads ? 1 : threads * tasks_per_thread();
  auto product = [&](int64_t q) {
    return Product<T>{s.m,
                      s.n,
                      s.k,
                      a.data + q * a.batch_stride,
                      a.row_stride,
                      a.col_stride,
                      b.data + q * b.batch_stride,
                      b.row_stride,
                      b.col_stride,
                      c.data + q * c.batch_stride,
                      c.row_stride,
                      c.col_stride,
                      accumulate,
                      epilogue,
                      q * s.m,
                      a_patches};
  };
  if (!a_patches && s.k <= kShallowDepth && b.col_stride == 1 && c.col_stride == 1) {
    parallel_for(
        s.batch * per_matrix,
        [&](int64_t task) {
          auto [i0, i1] = part_of(s.m, per_matrix, task % per_matrix, 1);
          const Product<T> x = product(task / per_matrix);
          for (int64_t r = i0; r < i1; r += kShallowRowBlock) {
            const int64_t r1 = std::min(i1, r + kShallowRowBlock);
            kernels.shallow(x, r, r1);
            if (epilogue.fn) run_epilogue(epilogue, x.first_row + r, x.first_row + r1);
          }
        },
        length);
    return;
  }
  // Split the longer side: each thread then packs the whole of the other, smaller operand, and
  // its part keeps whole panels (72 of 144 columns would leave a panel a quarter full). A
  // square product splits its columns when A is transposed (packing A is a copy, and each
  // thread's half of B stays in L2), its rows otherwise (packing a row-major A is a transpose,
  // which both threads would do). Measured at n = 512 and 1024 (docs/backend.md).
  const bool narrow = s.n <= kernels.narrow_nr;
  const int64_t mr = narrow ? kernels.narrow_mr : kernels.mr;
  const int64_t nr = narrow ? kernels.narrow_nr : kernels.nr;
  const auto block = narrow ? kernels.narrow_block : kernels.block;
  const bool longer_columns = s.n > s.m || (s.n == s.m && a.row_stride == 1);
  const bool split_columns =
      (s.n >= per_matrix * nr * 2 && longer_columns) || s.m < per_matrix * mr;
  parallel_for(
      s.batch * per_matrix,
      [&](int64_t task) {
        const int64_t t = task % per_matrix;
        const Product<T> x = product(task / per_matrix);
        int64_t i0 = 0, i1 = s.m, j0 = 0, j1 = s.n;
        if (split_columns)
          std::tie(j0, j1) = part_of(s.n, per_matrix, t, nr);
        else
          std::tie(i0, i1) = part_of(s.m, per_matrix, t, mr);
        if (i0 < i1 && j0 < j1) block(x, i0, i1, j0, j1);
      },
      length);
  // Threads that each computed some columns of every row: the rows are final only now.
  if (epilogue.fn && per_matrix > 1 && split_columns)
    parallel_for(s.batch * per_matrix, [&](int64_t task) {
      auto [i0, i1] = part_of(s.m, per_matrix, task % per_matrix, 1);
      const int64_t first_row = task / per_matrix * s.m;
      if (i0 < i1) run_epilogue(epilogue, first_row + i0, first_row + i1);
    });
}

template <class T>
void im2col_gemm_impl(const Im2colGeometry& g, const T* x, Matrices<const T> b, Matrices<T> c,
                      Epilogue epilogue = {}) {
  if (g.rows <= 0 || g.n <= 0) return;
  const Isa<T>& kernels = isa<T>();
  const bool narrow = g.n <= kernels.narrow_nr;
  const auto run = narrow ? kernels.narrow_patches : kernels.patches;
  const int64_t segments = g.rows / g.seg_len;
  const PatchProduct<T> product{
      g.n,          g.k,           x,       g.seg_len,    g.row_stride, g.seg_offsets,
      g.run_len,    g.run_offsets, b.data,  b.row_stride, b.col_stride, c.data,
      c.row_stride, c.col_stride,  epilogue};
  if (g.k <= 0) {
    for (int64_t r = 0; r < g.rows; ++r)
      for (int64_t j = 0; j < g.n; ++j) c.data[r * c.row_stride + j * c.col_stride] = T(0);
    if (epilogue.fn) run_epilogue(epilogue, 0, g.rows);
    return;
  }
  const int64_t work = g.rows * g.n * g.k;
  const int64_t parts = std::min<int64_t>(work < kParallelWork ? 1 : thread_count(), segments);
  parallel_for(
      parts,
      [&](int64_t t) {
        auto [s0, s1] = part_of(segments, parts, t, 1);
        if (s0 < s1) run(product, s0, s1);
      },
      job_length(work));
}

template <class T>
const T* first_element(const RefjitMemRefHead* m) {
  return static_cast<const T*>(m->aligned) + m->offset;
}

template <class T>
void gemm_entry(int64_t batch, int64_t m, int64_t n, int64_t k, const RefjitMemRefHead* a,
                int64_t a_bs, int64_t a_rs, int64_t a_cs, const RefjitMemRefHead* b, int64_t b_bs,
                int64_t b_rs, int64_t b_cs, const RefjitMemRefHead* c, int64_t c_bs, int64_t c_rs,
                int64_t c_cs, int64_t accumulate, Epilogue epilogue) {
  gemm_impl<T>({batch, m, n, k}, {first_element<T>(a), a_bs, a_rs, a_cs},
               {first_element<T>(b), b_bs, b_rs, b_cs},
               {const_cast<T*>(first_element<T>(c)), c_bs, c_rs, c_cs}, accumulate != 0, epilogue);
}

// The geometry vector of refjit_im2col_gemm_* and refjit_im2col_tgemm_* (gemm.h), decoded;
// `n` is the product's column count.
struct DecodedGeometry {
  std::vector<int64_t> seg_offsets;
  Im2colGeometry g;

  DecodedGeometry(const RefjitMemRefHead* geometry, int64_t n) {
    const int64_t* v = static_cast<const int64_t*>(geometry->aligned) + geometry->offset;
    const int64_t q = v[0];
    const int64_t* sizes = v + 1;
    const int64_t* steps = v + 1 + q;
    const int64_t runs = v[1 + 2 * q], run_len = v[2 + 2 * q];
    // Segments: every row dim but the last, walked in row-major order.
    seg_offsets.assign(1, 0);
    for (int64_t d = 0; d + 1 < q; ++d) {
      std::vector<int64_t> next;
      next.reserve(seg_offsets.size() * static_cast<size_t>(sizes[d]));
      for (int64_t base : seg_offsets)
        for (int64_t i = 0; i < sizes[d]; ++i) next.push_back(base + i * steps[d]);
      seg_offsets = std::move(next);
    }
    const int64_t seg_len = sizes[q - 1];
    g = {static_cast<int64_t>(seg_offsets.size()) * seg_len,
         n,
         runs * run_len,
         seg_len,
         steps[q - 1],
         seg_offsets.data(),
         run_len,
         v + 3 + 2 * q};
  }
  DecodedGeometry(const DecodedGeometry&) = delete;
  DecodedGeometry& operator=(const DecodedGeometry&) = delete;
};

template <class T>
void im2col_gemm_entry(const RefjitMemRefHead* geometry, const RefjitMemRefHead* x,
                       const RefjitMemRefHead* b, int64_t b_rs, int64_t b_cs,
                       const RefjitMemRefHead* c, int64_t c_rs, int64_t c_cs, int64_t n,
                       Epilogue epilogue) {
  const DecodedGeometry d(geometry, n);
  im2col_gemm_impl<T>(d.g, first_element<T>(x), {first_element<T>(b), 0, b_rs, b_cs},
                      {const_cast<T*>(first_element<T>(c)), 0, c_rs, c_cs}, epilogue);
}

// C (k x n) = A^T B for the geometry's A (rows x k): B has the im2col's rows.
template <class T>
void im2col_tgemm_entry(const RefjitMemRefHead* geometry, const RefjitMemRefHead* x,
                        const RefjitMemRefHead* b, int64_t b_rs, int64_t b_cs,
                        const RefjitMemRefHead* c, int64_t c_rs, int64_t c_cs, int64_t n) {
  const DecodedGeometry d(geometry, n);
  gemm_impl<T>({1, d.g.k, n, d.g.rows}, {first_element<T>(x), 0, 0, 0},
               {first_element<T>(b), 0, b_rs, b_cs},
               {const_cast<T*>(first_element<T>(c)), 0, c_rs, c_cs}, false, {}, &d.g);
}

}  // namespace

void gemm(GemmShape shape, Matrices<const float> a, Matrices<const float> b, Matrices<float> c,
          bool accumulate, Epilogue epilogue) {
  gemm_impl(shape, a, b, c, accumulate, epilogue);
}

void gemm(GemmShape shape, Matrices<const double> a, Matrices<const double> b, Matrices<double> c,
          bool accumulate, Epilogue epilogue) {
  gemm_impl(shape, a, b, c, accumulate, epilogue);
}

void im2col_gemm(const Im2colGeometry& g, const float* x, Matrices<const float> b,
                 Matrices<float> c) {
  im2col_gemm_impl(g, x, b, c);
}

void im2col_gemm(const Im2colGeometry& g, const double* x, Matrices<const double> b,
                 Matrices<double> c) {
  im2col_gemm_impl(g, x, b, c);
}

const char* gemm_isa() { return isa<float>().name; }

}  // namespace refjit::kernels

extern "C" {

#define REFJIT_GEMM_ENTRIES(SUFFIX, T)                                                            \
  void refjit_gemm_##SUFFIX(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t,              \
                            const RefjitMemRefHead* a, int64_t a_bs, int64_t a_rs, int64_t a_cs,  \
                            int64_t, const RefjitMemRefHead* b, int64_t b_bs, int64_t b_rs,       \
                            int64_t b_cs, int64_t, const RefjitMemRefHead* c, int64_t c_bs,       \
                            int64_t c_rs, int64_t c_cs, int64_t accumulate) {                     \
    refjit::kernels::gemm_entry<T>(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c,   \
                                   c_bs, c_rs, c_cs, accumulate, {});                             \
  }                                                                                               \
  void refjit_gemm_##SUFFIX##_then(                                                               \
      int64_t batch, int64_t m, int64_t n, int64_t k, int64_t, const RefjitMemRefHead* a,         \
      int64_t a_bs, int64_t a_rs, int64_t a_cs, int64_t, const RefjitMemRefHead* b, int64_t b_bs, \
      int64_t b_rs, int64_t b_cs, int64_t, const RefjitMemRefHead* c, int64_t c_bs, int64_t c_rs, \
      int64_t c_cs, int64_t accumulate, void (*epilogue)(void*, int64_t, int64_t), void* ctx) {   \
    refjit::kernels::gemm_entry<T>(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c,   \
                                   c_bs, c_rs, c_cs, accumulate, {epilogue, ctx});                \
  }

REFJIT_GEMM_ENTRIES(f32, float)
REFJIT_GEMM_ENTRIES(f64, double)

#define REFJIT_IM2COL_ENTRY(SUFFIX, T)                                                             \
  void refjit_im2col_gemm_##SUFFIX(int64_t, const RefjitMemRefHead* geometry, int64_t,             \
                                   const RefjitMemRefHead* x, int64_t, const RefjitMemRefHead* b,  \
                                   int64_t b_rs, int64_t b_cs, int64_t, const RefjitMemRefHead* c, \
                                   int64_t c_rs, int64_t c_cs, int64_t n) {                        \
    refjit::kernels::im2col_gemm_entry<T>(geometry, x, b, b_rs, b_cs, c, c_rs, c_cs, n, {});       \
  }                                                                                                \
  void refjit_im2col_gemm_##SUFFIX##_then(                                                         \
      int64_t, const RefjitMemRefHead* geometry, int64_t, const RefjitMemRefHead* x, int64_t,      \
      const RefjitMemRefHead* b, int64_t b_rs, int64_t b_cs, int64_t, const RefjitMemRefHead* c,   \
      int64_t c_rs, int64_t c_cs, int64_t n, void (*epilogue)(void*, int64_t, int64_t),            \
      void* ctx) {                                                                                 \
    refjit::kernels::im2col_gemm_entry<T>(geometry, x, b, b_rs, b_cs, c, c_rs, c_cs, n,            \
                                          {epilogue, ctx});                                        \
  }                                                                                                \
  void refjit_im2col_tgemm_##SUFFIX(                                                               \
      int64_t, const RefjitMemRefHead* geometry, int64_t, const RefjitMemRefHead* x, int64_t,      \
      const RefjitMemRefHead* b, int64_t b_rs, int64_t b_cs, int64_t, const RefjitMemRefHead* c,   \
      int64_t c_rs, int64_t c_cs, int64_t n) {                                                     \
    refjit::kernels::im2col_tgemm_entry<T>(geometry, x, b, b_rs, b_cs, c, c_rs, c_cs, n);          \
  }

REFJIT_IM2COL_ENTRY(f32, float)
REFJIT_IM2COL_ENTRY(f64, double)
}
