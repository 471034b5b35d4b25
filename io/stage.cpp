#include "io/stage.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "src/base/error.h"
#include "src/comm/comm.h"

namespace cnn {

namespace {

void (*g_after_copy)(const std::string&) = nullptr;

constexpr size_t kChunk = 4 << 20;

std::string what_to_do() {
  return strprintf("(on host %s); give --data.stage_dir a writable node-local directory with room for the dataset "
                   "(e.g. the job's $TMPDIR), or leave --data.stage_dir out to read from the shared file system",
                   host_name().c_str());
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void mkdir_all(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if ((i == dir.size() || dir[i] == '/') && !cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      raise(kExitData, "--data.stage_dir: cannot create '%s': %s %s", cur.c_str(), std::strerror(errno),
            what_to_do().c_str());
    if (i < dir.size()) cur += dir[i];
  }
}

// CRC-32 and size of a whole file, read back from disk.
uLong crc_of_file(const std::string& path, size_t* bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) raise(kExitData, "cannot reopen the staged copy '%s': %s", path.c_str(), std::strerror(errno));
  std::vector<unsigned char> buf(kChunk);
  uLong crc = crc32(0, Z_NULL, 0);
  *bytes = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      raise(kExitData, "cannot read back the staged copy '%s': %s", path.c_str(), std::strerror(e));
    }
    if (n == 0) break;
    crc = crc32(crc, buf.data(), static_cast<uInt>(n));
    *bytes += static_cast<size_t>(n);
  }
  ::close(fd);
  return crc;
}

// Copies one regular file into `dst` (written as dst.part, renamed once verified).
size_t copy_file(const std::string& src, const std::string& dst) {
  const std::string dir = parent_of(dst), part = dst + ".part";
  const int in = ::open(src.c_str(), O_RDONLY);
  if (in < 0) raise(kExitData, "cannot open '%s' to stage it: %s", src.c_str(), std::strerror(errno));
  struct stat st {};
  ::fstat(in, &st);
  const size_t size = static_cast<size_t>(st.st_size);
  struct statvfs vfs {};
  ::unlink(part.c_str());  // a leftover of an interrupted run must not count as used space
  if (::statvfs(dir.c_str(), &vfs) == 0 && static_cast<double>(vfs.f_bavail) * vfs.f_frsize < size) {
    ::close(in);
    raise(kExitData, "--data.stage_dir: not enough space in '%s' to stage '%s' (%.1f MiB): %.1f MiB free %s",
          dir.c_str(), src.c_str(), size / 1048576.0, static_cast<double>(vfs.f_bavail) * vfs.f_frsize / 1048576.0,
          what_to_do().c_str());
  }
  const int out = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out < 0) {
    const int e = errno;
    ::close(in);
    raise(kExitData, "--data.stage_dir: cannot write '%s': %s %s", part.c_str(), std::strerror(e),
          what_to_do().c_str());
  }
  std::vector<unsigned char> buf(kChunk);
  uLong crc = crc32(0, Z_NULL, 0);
  size_t copied = 0;
  std::string err;
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0) err = strprintf("cannot read '%s': %s", src.c_str(), std::strerror(errno));
    if (n <= 0) break;
    crc = crc32(crc, buf.data(), static_cast<uInt>(n));
    for (ssize_t done = 0; done < n && err.empty();) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0) err = strprintf("--data.stage_dir: writing '%s' failed after %.1f MiB: %s %s", part.c_str(),
                                 (copied + done) / 1048576.0, std::strerror(errno), what_to_do().c_str());
      else done += w;
    }
    if (!err.empty()) break;
    copied += static_cast<size_t>(n);
  }
  if (err.empty() && ::fsync(out) != 0)
    err = strprintf("--data.stage_dir: flushing '%s' failed: %s %s", part.c_str(), std::strerror(errno),
                    what_to_do().c_str());
  ::close(in);
  ::close(out);
  if (!err.empty()) {
    ::unlink(part.c_str());
    raise(kExitData, "%s", err.c_str());
  }
  if (g_after_copy) g_after_copy(part);
  size_t back = 0;
  const uLong back_crc = crc_of_file(part, &back);
  if (back != copied || back_crc != crc) {
    ::unlink(part.c_str());
    raise(kExitData, "--data.stage_dir: the staged copy of '%s' does not match it (%zu bytes with CRC-32 %08lx "
          "read back, %zu bytes with CRC-32 %08lx read from the source); the node-local disk of host %s may be "
          "failing: check it, or leave --data.stage_dir out", src.c_str(), back, back_crc, copied, crc,
          host_name().c_str());
  }
  if (::rename(part.c_str(), dst.c_str()) != 0)
    raise(kExitData, "--data.stage_dir: cannot rename '%s' to '%s': %s", part.c_str(), dst.c_str(),
          std::strerror(errno));
  return copied;
}

}  // namespace

size_t stage_copy(const std::string& src, const std::string& dst) {
  struct stat st {};
  if (::stat(src.c_str(), &st) != 0)
    raise(kExitData, "cannot stage '%s': %s (check --data.train/--data.test)", src.c_str(), std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) {
    mkdir_all(parent_of(dst));
    return copy_file(src, dst);
  }
  // A directory dataset (LMDB): its regular files, one level.
  mkdir_all(dst);
  DIR* d = ::opendir(src.c_str());
  if (!d) raise(kExitData, "cannot list '%s' to stage it: %s", src.c_str(), std::strerror(errno));
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    struct stat fst {};
    const std::string p = src + "/" + e->d_name;
    if (::stat(p.c_str(), &fst) == 0 && S_ISREG(fst.st_mode)) names.push_back(e->d_name);
  }
  ::closedir(d);
  size_t total = 0;
  for (const auto& n : names) total += copy_file(src + "/" + n, dst + "/" + n);
  return total;
}

StageResult stage_for_node(const std::string& src, const std::string& dir, const std::string& tag) {
  StageResult r;
  r.path = dir + "/" + tag + "-" + base_of(src);
  const auto t0 = std::chrono::steady_clock::now();
  // The leader sends "" (staged) or the error; the message then names its host and the directory everywhere.
  std::string outcome;
  if (local_rank() == 0) {
    try {
      r.bytes = stage_copy(src, r.path);
      r.copied = true;
    } catch (const Error& e) {
      outcome = e.what();
    }
  }
  node_broadcast(outcome, 0);
  if (!outcome.empty())
    raise(kExitData, "%s%s", outcome.c_str(),
          local_rank() == 0 ? "" : " (reported by node-local rank 0, which stages for the node)");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void set_stage_after_copy_hook(void (*hook)(const std::string&)) { g_after_copy = hook; }

}  // namespace cnn
