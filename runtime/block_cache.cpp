#include "runtime/block_cache.h"

#include <pthread.h>
#include <sanitizer/asan_interface.h>

#include <atomic>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace refjit {

namespace {

constexpr std::align_val_t kAlign{64};

class BlockCache {
 public:
  // A kept block of exactly `size` bytes, or nullptr.
  std::byte* take(size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    std::byte* p = it->second.back();
    it->second.pop_back();
    held_ -= size;
    ASAN_UNPOISON_MEMORY_REGION(p, size);
    return p;
  }

  // Keeps `p` (of `size` bytes) when the cache has room, else frees it.
  void give_back(std::byte* p, size_t size) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (held_ + size <= kMaxCachedBytes) {
        // Under AddressSanitizer a kept block reads as freed memory until it is handed out.
        ASAN_POISON_MEMORY_REGION(p, size);
        free_[size].push_back(p);
        held_ += size;
        return;
      }
    }
    ::operator delete[](p, kAlign);
  }

  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }

  void release() {
    std::unordered_map<size_t, std::vector<std::byte*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(free_);
      held_ = 0;
    }
    for (auto& [size, list] : blocks)
      for (std::byte* p : list) {
        ASAN_UNPOISON_MEMORY_REGION(p, size);
        ::operator delete[](p, kAlign);
      }
  }

 private:
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<std::byte*>> free_;  // by size
  size_t held_ = 0;
};

std::atomic<BlockCache*> g_cache{nullptr};
std::once_flag g_cache_once;

void create_cache() {
  std::call_once(g_cache_once, [] {
    pthread_atfork(nullptr, nullptr, [] { g_cache.store(new BlockCache); });
    g_cache.store(new BlockCache, std::memory_order_release);
  });
}

// Created when the library is loaded, before the process has threads that could fork while
// another is inside call_once (a child would wait on it forever); create_cache() again covers
// arrays made by other libraries' static initialisers first.
[[maybe_unused]] const bool g_cache_created = (create_cache(), true);

// Never destroyed: arrays freed during static destruction still give their blocks back. A
// forked child starts a cache of its own (the parent's lock may have been held by a thread
// the child does not have; the parent's kept blocks are left to it).
BlockCache& cache() {
  BlockCache* c = g_cache.load(std::memory_order_acquire);
  if (c) return *c;
  create_cache();
  return *g_cache.load(std::memory_order_acquire);
}

}  // namespace

std::shared_ptr<std::byte[]> allocate_block(size_t bytes) {
  const size_t n = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  if (n < kMinCachedBytes) {
    auto* p = static_cast<std::byte*>(::operator new[](n, kAlign));
    return std::shared_ptr<std::byte[]>(p, [](std::byte* q) { ::operator delete[](q, kAlign); });
  }
  std::byte* p = cache().take(n);
  if (!p) p = static_cast<std::byte*>(::operator new[](n, kAlign));
  return std::shared_ptr<std::byte[]>(p, [n](std::byte* q) { cache().give_back(q, n); });
}

size_t cached_block_bytes() { return cache().held(); }

void release_cached_blocks() { cache().release(); }

}  // namespace refjit
