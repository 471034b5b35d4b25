#include "kernels/simt/fiber.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

// AddressSanitizer must be told about stack switches, or it reports the fibers' stacks as errors; with
// these annotations an ASan build of emulated kernels finds out-of-bounds accesses to device memory.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define SIMT_ASAN 1
#else
#define SIMT_ASAN 0
#endif

#if !defined(__x86_64__)
#error "the SIMT emulator's context switch is written for x86-64"
#endif

// simt_ctx_switch(save, load): pushes the callee-saved state of the System V ABI onto the current stack,
// stores the stack pointer to *save, then loads `load` and pops the state saved there. A fresh fiber's
// stack is laid out by Fiber::reset so that the final `ret` lands in simt_ctx_start with r12 = argument and
// r13 = entry function.
asm(R"(
  .text
  .p2align 4
  .globl simt_ctx_switch
  .hidden simt_ctx_switch
  .type simt_ctx_switch, @function
simt_ctx_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size simt_ctx_switch, .-simt_ctx_switch

  .p2align 4
  .globl simt_ctx_start
  .hidden simt_ctx_start
  .type simt_ctx_start, @function
simt_ctx_start:
  endbr64
  movq %r12, %rdi
  callq *%r13
  ud2
  .size simt_ctx_start, .-simt_ctx_start
)");

extern "C" void simt_ctx_switch(void** save_sp, void* load_sp);
extern "C" void simt_ctx_start();

namespace simt {
namespace {

ContextKind initial_kind() {
  const char* env = std::getenv("CNNTRAIN_SIMT_CONTEXT");
  return env && std::strcmp(env, "ucontext") == 0 ? ContextKind::kUcontext : ContextKind::kAsm;
}

std::atomic<ContextKind> g_kind{initial_kind()};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "simt: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

// Guard region of the fiber running on this host thread, for the SIGSEGV handler.
thread_local const char* t_guard = nullptr;
struct sigaction g_previous_segv;

// A fault inside the running fiber's guard region is a stack overflow of an emulated CUDA thread: say so
// and abort. Any other fault belongs to whoever handled SIGSEGV before (MPI, sanitizers, the default).
void on_segv(int sig, siginfo_t* info, void* context) {
  const char* addr = static_cast<const char*>(info->si_addr);
  if (t_guard && addr >= t_guard && addr < t_guard + detail::FiberStack::kGuard) {
    char msg[256];
    const detail::ThreadCtx* c = detail::t_ctx;
    const int n = std::snprintf(msg, sizeof msg,
                                "simt: stack overflow in emulated CUDA thread (%u,%u,%u) of block (%u,%u,%u): "
                                "fiber stacks are %zu KiB, keep per-thread arrays small\n",
                                c ? c->thread_idx.x : 0, c ? c->thread_idx.y : 0, c ? c->thread_idx.z : 0,
                                c ? c->block_idx.x : 0, c ? c->block_idx.y : 0, c ? c->block_idx.z : 0,
                                detail::FiberStack::kBytes / 1024);
    if (n > 0) (void)!write(2, msg, static_cast<size_t>(n));
    std::abort();
  }
  if (g_previous_segv.sa_flags & SA_SIGINFO) {
    g_previous_segv.sa_sigaction(sig, info, context);
  } else if (g_previous_segv.sa_handler != SIG_DFL && g_previous_segv.sa_handler != SIG_IGN) {
    g_previous_segv.sa_handler(sig);
  } else {
    signal(sig, SIG_DFL);  // returning re-executes the faulting instruction, which now ends the process
  }
}

// The handler needs a stack of its own, since the faulting one is exhausted: one per host thread.
void install_overflow_handler() {
  static thread_local bool installed = false;
  if (installed) return;
  installed = true;
  stack_t alt{};
  alt.ss_size = 64 * 1024;
  alt.ss_sp = mmap(nullptr, alt.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (alt.ss_sp == MAP_FAILED || sigaltstack(&alt, nullptr) != 0) die("sigaltstack failed");
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = &on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &g_previous_segv) != 0) die("sigaction(SIGSEGV) failed");
  });
}

}  // namespace

void set_context_kind(ContextKind kind) { g_kind.store(kind); }
ContextKind context_kind() { return g_kind.load(); }

namespace detail {

FiberStack::FiberStack() {
  void* p = mmap(nullptr, kGuard + kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) die("mmap of a fiber stack failed");
  base_ = static_cast<char*>(p);
  install_overflow_handler();
  if (mprotect(base_, kGuard, PROT_NONE) != 0) die("mprotect of a fiber guard region failed");
}

FiberStack::~FiberStack() { munmap(base_, kGuard + kBytes); }

struct Fiber::Ucontext {
  ucontext_t fiber;
  ucontext_t caller;
};

Fiber::Fiber() {
  static std::atomic<unsigned> count{0};
  color_ = (count.fetch_add(1) % 61) * 64;
}
Fiber::~Fiber() = default;

void Fiber::run(void* self) {
  auto* f = static_cast<Fiber*>(self);
#if SIMT_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &f->caller_stack_, &f->caller_stack_size_);
#endif
  f->entry_(f->arg_);
  f->finished_ = true;
  f->yield();
  std::fprintf(stderr, "simt: a finished fiber was resumed\n");
  std::abort();
}

// makecontext passes only int arguments, so the pointer travels in two halves.
static void ucontext_entry(unsigned hi, unsigned lo) {
  Fiber::run(reinterpret_cast<void*>((static_cast<uintptr_t>(hi) << 32) | lo));
}

void Fiber::reset(Entry entry, void* arg) {
  entry_ = entry;
  arg_ = arg;
  finished_ = false;
  kind_ = context_kind();
#if SIMT_ASAN
  // Frames abandoned by a faulted launch never unpoisoned their redzones.
  __asan_unpoison_memory_region(stack_.bottom(), FiberStack::kBytes);
#endif
  if (kind_ == ContextKind::kUcontext) {
    if (!uc_) uc_ = std::make_unique<Ucontext>();
    if (getcontext(&uc_->fiber) != 0) die("getcontext failed");
    uc_->fiber.uc_stack.ss_sp = stack_.bottom();
    uc_->fiber.uc_stack.ss_size = FiberStack::kBytes;
    uc_->fiber.uc_link = nullptr;
    auto bits = reinterpret_cast<uintptr_t>(this);
    makecontext(&uc_->fiber, reinterpret_cast<void (*)()>(ucontext_entry), 2, static_cast<unsigned>(bits >> 32),
                static_cast<unsigned>(bits));
    return;
  }
  // Frame consumed by simt_ctx_switch: [mxcsr, fcw], r15, r14, r13, r12, rbx, rbp, return address. After
  // the `ret` the stack pointer is 16-byte aligned, as the ABI wants before simt_ctx_start's call. Stacks
  // start at different offsets within a page (color_) because page-aligned stack tops would put the hot
  // frames of all fibers into the same L1 cache sets.
  auto* frame = reinterpret_cast<uint64_t*>(stack_.top() - 128 - color_);
  uint32_t mxcsr;
  uint16_t fcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  frame[0] = mxcsr | (static_cast<uint64_t>(fcw) << 32);
  frame[1] = 0;                                       // r15
  frame[2] = 0;                                       // r14
  frame[3] = reinterpret_cast<uint64_t>(&Fiber::run);  // r13
  frame[4] = reinterpret_cast<uint64_t>(this);        // r12
  frame[5] = 0;                                       // rbx
  frame[6] = 0;                                       // rbp
  frame[7] = reinterpret_cast<uint64_t>(&simt_ctx_start);
  sp_ = frame;
}

void Fiber::resume() {
  t_guard = stack_.guard();
#if SIMT_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, stack_.bottom(), FiberStack::kBytes);
#endif
  if (kind_ == ContextKind::kUcontext) {
    if (swapcontext(&uc_->caller, &uc_->fiber) != 0) die("swapcontext failed");
  } else {
    simt_ctx_switch(&caller_sp_, sp_);
  }
#if SIMT_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

void Fiber::yield() {
#if SIMT_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(finished_ ? nullptr : &fake_stack, caller_stack_, caller_stack_size_);
#endif
  if (kind_ == ContextKind::kUcontext) {
    if (swapcontext(&uc_->fiber, &uc_->caller) != 0) die("swapcontext failed");
  } else {
    simt_ctx_switch(&sp_, caller_sp_);
  }
#if SIMT_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, &caller_stack_, &caller_stack_size_);
#endif
}

}  // namespace detail
}  // namespace simt
