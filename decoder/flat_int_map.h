// A small open-addressing hash map from 64-bit keys to int32 values, for the
// decoder's hot paths (trie children, automaton arcs). Unlike
// std::unordered_map it never allocates per entry, and Clear() keeps its
// capacity, so a reused decoder state stops allocating once it has seen its
// largest utterance.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/check.h"

namespace oasr::decoder {

// Keys are any uint64 except kEmptyKey. No erase: users rebuild after
// compaction. Thread-safety: none (const methods may be called concurrently).
class FlatIntMap {
 public:
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};

  FlatIntMap() { Rehash(16); }

  // Makes room for `n` entries without growing (load factor at most 1/2).
  void Reserve(size_t n) {
    size_t capacity = keys_.size();
    while (capacity < 2 * n) capacity *= 2;
    if (capacity != keys_.size()) Rehash(capacity);
  }

  // Removes every entry; keeps the capacity.
  void Clear() {
    std::fill(keys_.begin(), keys_.end(), kEmptyKey);
    size_ = 0;
  }

  // The value stored for `key`, or -1.
  int32_t Find(uint64_t key) const {
    for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == key) return values_[i];
      if (keys_[i] == kEmptyKey) return -1;
    }
  }

  // Stores `value` under `key`, replacing an existing value.
  void Insert(uint64_t key, int32_t value) {
    OASR_DCHECK(key != kEmptyKey);
    if (2 * (size_ + 1) > keys_.size()) Rehash(2 * keys_.size());
    size_t i = Hash(key) & mask_;
    while (keys_[i] != kEmptyKey && keys_[i] != key) i = (i + 1) & mask_;
    if (keys_[i] == kEmptyKey) ++size_;
    keys_[i] = key;
    values_[i] = value;
  }

  size_t size() const { return size_; }
  size_t capacity() const { return keys_.size() / 2; }

  // Packs two non-negative int32 ids into one key.
  static uint64_t Key(int32_t high, int32_t low) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(high)) << 32) | static_cast<uint32_t>(low);
  }

 private:
  // splitmix64's finaliser: consecutive ids spread over the whole table.
  static uint64_t Hash(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  }

  void Rehash(size_t capacity) {
    std::vector<uint64_t> old_keys(capacity, kEmptyKey);
    std::vector<int32_t> old_values(capacity, -1);
    old_keys.swap(keys_);
    old_values.swap(values_);
    mask_ = capacity - 1;
    size_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != kEmptyKey) Insert(old_keys[i], old_values[i]);
    }
  }

  std::vector<uint64_t> keys_;
  std::vector<int32_t> values_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace oasr::decoder
