// SPDX-License-Identifier: Apache-2.0
// RAII owners of device and pinned host memory. Allocation failures throw BackendError naming
// what was being allocated, the bytes requested and the device's free memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sinkscope::gpu {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, std::string what);
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      swap(o);
    }
    return *this;
  }

  void* get() const { return m_ptr; }
  template <class T>
  T* as() const {
    return static_cast<T*>(m_ptr);
  }
  size_t bytes() const { return m_bytes; }
  explicit operator bool() const { return m_ptr != nullptr; }

 private:
  void release() noexcept;
  void swap(DeviceBuffer& o) noexcept {
    std::swap(m_ptr, o.m_ptr);
    std::swap(m_bytes, o.m_bytes);
  }
  void* m_ptr = nullptr;
  size_t m_bytes = 0;
};

// Page-locked host memory (async device-to-host copies of logits and probes).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(size_t bytes, const std::string& what);
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept {
    std::swap(m_ptr, o.m_ptr);
    std::swap(m_bytes, o.m_bytes);
  }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      std::swap(m_ptr, o.m_ptr);
      std::swap(m_bytes, o.m_bytes);
    }
    return *this;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(m_ptr);
  }
  size_t bytes() const { return m_bytes; }

 private:
  void release() noexcept;
  void* m_ptr = nullptr;
  size_t m_bytes = 0;
};

}  // namespace sinkscope::gpu
