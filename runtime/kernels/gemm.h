// Dense matrix products for native code: JIT-compiled dot_generals over f32 and f64 call
// refjit_gemm_f32/f64 (backend/lower_reduce.cpp), as XLA's CPU backend calls its own
// runtime kernels. Cache-blocked and packed (the BLIS scheme: a micro-kernel keeps an MR x NR
// block of C in vector registers), vectorised for AVX-512, AVX2 or plain SSE2 as the CPU
// allows, and split over the runtime's threads for large products (thread_pool.h).
//
// Every element of C sums its k products in the same order whatever the thread count, so
// results do not depend on REFJIT_NUM_THREADS.
#pragma once

#include <cstdint>

namespace refjit::kernels {

// A batch of strided matrices: element (i, j) of matrix `b` is at
// data[b * batch_stride + i * row_stride + j * col_stride]; strides count elements and may be
// zero (a matrix shared by the whole batch) or negative.
template <class T>
struct Matrices {
  T* data;
  int64_t batch_stride, row_stride, col_stride;
};

struct GemmShape {
  int64_t batch, m, n, k;  // C[b] (m x n) = A[b] (m x k) times B[b] (k x n)
};

// Work on rows of C as soon as they hold their final values, while they are still in cache:
// `fn(ctx, lo, hi)` for rows [lo, hi) of the batch seen as one tall matrix (row i of matrix
// q is row q * m + i). Every row is passed exactly once; calls for disjoint rows may run on
// several threads at once. Generated code passes an elementwise consumer of the product this
// way (a bias and an activation: a matrix-product epilogue), so it makes no pass of its own
// over C.
struct Epilogue {
  void (*fn)(void* ctx, int64_t lo, int64_t hi) = nullptr;
  void* ctx = nullptr;
};

// C = A B for every matrix of the batch, or C += A B with `accumulate`, then the epilogue on
// C's rows. C must not overlap A or B.
void gemm(GemmShape shape, Matrices<const float> a, Matrices<const float> b, Matrices<float> c,
          bool accumulate = false, Epilogue epilogue = {});
void gemm(GemmShape shape, Matrices<const double> a, Matrices<const double> b, Matrices<double> c,
          bool accumulate = false, Epilogue epilogue = {});

// The geometry of an implicit im2col (refjit/ir/im2col.h): C (rows x n) = A (rows x k) times
// B, where A is never written out. Element (i, p) of A is at
//   x[seg_offsets[i / seg_len] + (i % seg_len) * row_stride + run_offsets[p / run_len] +
//     p % run_len]:
// rows come in segments (a convolution's output rows), depths in runs of contiguous elements
// (a window's channels). rows is a multiple of seg_len and k of run_len.
struct Im2colGeometry {
  int64_t rows, n, k;
  int64_t seg_len, row_stride;
  const int64_t* seg_offsets;
  int64_t run_len;
  const int64_t* run_offsets;
};

// C = A B with A as above; B and C are single strided matrices (their batch strides unused).
void im2col_gemm(const Im2colGeometry& g, const float* x, Matrices<const float> b,
                 Matrices<float> c);
void im2col_gemm(const Im2colGeometry& g, const double* x, Matrices<const double> b,
                 Matrices<double> c);

// Which vector code the kernels run on this CPU: "avx512", "avx2" or "sse2".
const char* gemm_isa();

}  // namespace refjit::kernels

// The entry points generated code calls. Each operand comes as an unranked memref (MLIR's
// calling convention: its rank, then a pointer to its ranked descriptor, which starts with
// the allocated pointer, the aligned pointer and the element offset) followed by its batch,
// row and column strides in elements; first the sizes (batch, m, n, k); last whether the
// product is added to C (1) rather than stored (0). The `_then` entries take an epilogue
// (its function and context) after those.
extern "C" {
struct RefjitMemRefHead {
  void* allocated;
  void* aligned;
  int64_t offset;
};
void refjit_gemm_f32(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t a_rank,
                     const RefjitMemRefHead* a, int64_t a_bs, int64_t a_rs, int64_t a_cs,
                     int64_t b_rank, const RefjitMemRefHead* b, int64_t b_bs, int64_t b_rs,
                     int64_t b_cs, int64_t c_rank, const RefjitMemRefHead* c, int64_t c_bs,
                     int64_t c_rs, int64_t c_cs, int64_t accumulate);
void refjit_gemm_f64(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t a_rank,
                     const RefjitMemRefHead* a, int64_t a_bs, int64_t a_rs, int64_t a_cs,
                     int64_t b_rank, const RefjitMemRefHead* b, int64_t b_bs, int64_t b_rs,
                     int64_t b_cs, int64_t c_rank, const RefjitMemRefHead* c, int64_t c_bs,
                     int64_t c_rs, int64_t c_cs, int64_t accumulate);
void refjit_gemm_f32_then(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t a_rank,
                          const RefjitMemRefHead* a, int64_t a_bs, int64_t a_rs, int64_t a_cs,
                          int64_t b_rank, const RefjitMemRefHead* b, int64_t b_bs, int64_t b_rs,
                          int64_t b_cs, int64_t c_rank, const RefjitMemRefHead* c, int64_t c_bs,
                          int64_t c_rs, int64_t c_cs, int64_t accumulate,
                          void (*epilogue)(void*, int64_t, int64_t), void* ctx);
void refjit_gemm_f64_then(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t a_rank,
                          const RefjitMemRefHead* a, int64_t a_bs, int64_t a_rs, int64_t a_cs,
                          int64_t b_rank, const RefjitMemRefHead* b, int64_t b_bs, int64_t b_rs,
                          int64_t b_cs, int64_t c_rank, const RefjitMemRefHead* c, int64_t c_bs,
                          int64_t c_rs, int64_t c_cs, int64_t accumulate,
                          void (*epilogue)(void*, int64_t, int64_t), void* ctx);
// im2col_dot (refjit/ir/im2col.h): `geometry` is an i64 vector
//   [q, sizes[q], steps[q], runs, run_len, run_offsets[runs]]
// where the product's rows are the multi-indices over sizes (a window's shape without its
// channels), steps[d] is how far one step along row dim d moves in x (in elements), and each
// run of run_len contiguous depths starts run_offsets[r] after the row's first element. B is
// (runs * run_len) x n, C is rows x n, each with its row and column strides.
void refjit_im2col_gemm_f32(int64_t geometry_rank, const RefjitMemRefHead* geometry, int64_t x_rank,
                            const RefjitMemRefHead* x, int64_t b_rank, const RefjitMemRefHead* b,
                            int64_t b_rs, int64_t b_cs, int64_t c_rank, const RefjitMemRefHead* c,
                            int64_t c_rs, int64_t c_cs, int64_t n);
void refjit_im2col_gemm_f64(int64_t geometry_rank, const RefjitMemRefHead* geometry, int64_t x_rank,
                            const RefjitMemRefHead* x, int64_t b_rank, const RefjitMemRefHead* b,
                            int64_t b_rs, int64_t b_cs, int64_t c_rank, const RefjitMemRefHead* c,
                            int64_t c_rs, int64_t c_cs, int64_t n);
// With an epilogue (a consumer of the product run on its rows as they are final, as the
// `refjit_gemm_*_then` entries take it).
void refjit_im2col_gemm_f32_then(int64_t geometry_rank, const RefjitMemRefHead* geometry,
                                 int64_t x_rank, const RefjitMemRefHead* x, int64_t b_rank,
                                 const RefjitMemRefHead* b, int64_t b_rs, int64_t b_cs,
                                 int64_t c_rank, const RefjitMemRefHead* c, int64_t c_rs,
                                 int64_t c_cs, int64_t n, void (*epilogue)(void*, int64_t, int64_t),
                                 void* ctx);
void refjit_im2col_gemm_f64_then(int64_t geometry_rank, const RefjitMemRefHead* geometry,
                                 int64_t x_rank, const RefjitMemRefHead* x, int64_t b_rank,
                                 const RefjitMemRefHead* b, int64_t b_rs, int64_t b_cs,
                                 int64_t c_rank, const RefjitMemRefHead* c, int64_t c_rs,
                                 int64_t c_cs, int64_t n, void (*epilogue)(void*, int64_t, int64_t),
                                 void* ctx);
// im2col_tdot: the same geometry; C ((runs * run_len) x n) = A^T B with B rows x n.
void refjit_im2col_tgemm_f32(int64_t geometry_rank, const RefjitMemRefHead* geometry,
                             int64_t x_rank, const RefjitMemRefHead* x, int64_t b_rank,
                             const RefjitMemRefHead* b, int64_t b_rs, int64_t b_cs, int64_t c_rank,
                             const RefjitMemRefHead* c, int64_t c_rs, int64_t c_cs, int64_t n);
void refjit_im2col_tgemm_f64(int64_t geometry_rank, const RefjitMemRefHead* geometry,
                             int64_t x_rank, const RefjitMemRefHead* x, int64_t b_rank,
                             const RefjitMemRefHead* b, int64_t b_rs, int64_t b_cs, int64_t c_rank,
                             const RefjitMemRefHead* c, int64_t c_rs, int64_t c_cs, int64_t n);
}
