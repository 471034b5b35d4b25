// Fibers for the SIMT emulator: one per emulated CUDA thread, switched cooperatively on one host thread.
// The default context switch is a few instructions of x86-64 assembly (callee-saved registers, MXCSR and
// the x87 control word, then the stack pointer); ucontext is kept as a fallback because swapcontext makes a
// sigprocmask syscall per switch and is several times slower (see README.md for measured figures).
#pragma once
#include <cstddef>
#include <memory>

#include "kernels/simt/simt.h"

namespace simt {
namespace detail {

// A 64 KiB stack above a 64 KiB PROT_NONE guard region, so an overflow faults (and is reported as such)
// instead of corrupting the neighbouring stack; the guard is as large as the stack so that one big frame
// cannot jump over it. Pages are committed only when touched: idle stacks cost address space only.
class FiberStack {
 public:
  static constexpr size_t kBytes = 64 * 1024;
  static constexpr size_t kGuard = 64 * 1024;
  FiberStack();
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  char* top() const { return base_ + kGuard + kBytes; }
  char* bottom() const { return base_ + kGuard; }
  char* guard() const { return base_; }

 private:
  char* base_ = nullptr;
};

class Fiber {
 public:
  using Entry = void (*)(void* arg);
  Fiber();
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares the fiber to run entry(arg) from the top of its stack on the next resume(); whatever an
  // abandoned earlier run left on the stack is simply overwritten.
  void reset(Entry entry, void* arg);
  // From the scheduler: runs the fiber until it calls yield() or entry returns.
  void resume();
  // From inside the fiber: back to whoever called resume().
  void yield();
  bool finished() const { return finished_; }
  // The first frame of every fiber: entry(arg), then mark finished and yield for good.
  static void run(void* self);

 private:
  struct Ucontext;

  FiberStack stack_;
  void* sp_ = nullptr;         // saved stack pointer of the fiber (asm contexts)
  void* caller_sp_ = nullptr;  // saved stack pointer of the scheduler (asm contexts)
  std::unique_ptr<Ucontext> uc_;
  ContextKind kind_ = ContextKind::kAsm;
  Entry entry_ = nullptr;
  void* arg_ = nullptr;
  bool finished_ = true;
  size_t color_ = 0;
  const void* caller_stack_ = nullptr;  // the scheduler's stack, for AddressSanitizer builds
  size_t caller_stack_size_ = 0;
};

}  // namespace detail
}  // namespace simt
