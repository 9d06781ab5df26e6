// SPDX-License-Identifier: Apache-2.0
// Test-only fault injection for the CUDA backend (tests/gpu/test_cuda_backend.cpp): make the n-th
// next device/pinned allocation (DeviceBuffer, PinnedBuffer) or kernel launch (SS_LAUNCH) fail,
// so the error paths and the recovery after them run on a healthy GPU. Disarmed by default; a
// disarmed check is one relaxed atomic load. No CUDA headers here.
//
// The injected launch failure stands for a non-sticky launch error (bad configuration, too many
// resources): the kernel is not launched and the call throws BackendError. Sticky errors (an
// illegal address inside a kernel) poison the CUDA context; no process can recover from those.
#pragma once

namespace sinkscope::gpu {

enum class Fault {
  kAlloc,   // cudaMalloc / cudaMallocHost in DeviceBuffer / PinnedBuffer
  kLaunch,  // a kernel launcher called through SS_LAUNCH
};

// Arms one failure: the next after_n checks of that kind pass, the one after fails, then the
// fault disarms itself. after_n < 0 disarms.
void inject_fault(Fault fault, int after_n);
void clear_faults();
// How many injected faults of that kind have fired since the process started.
int faults_fired(Fault fault);

// Called at each check point: true when this one must fail (and counts it).
bool fault_fires(Fault fault);

}  // namespace sinkscope::gpu
