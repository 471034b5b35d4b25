#include "io/lmdb_env.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "src/base/error.h"

namespace cnn {

namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string parent_dir(const std::string& p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? "." : s == 0 ? "/" : p.substr(0, s);
}

// liblmdb's meta page: a 16-byte page header, then mm_magic (0xBEEFC0DE, native endian) and mm_version.
bool file_has_lmdb_magic(const std::string& file) {
  FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) return false;
  unsigned char b[20];
  bool ok = std::fread(b, 1, sizeof b, f) == sizeof b;
  std::fclose(f);
  uint32_t magic;
  std::memcpy(&magic, b + 16, 4);
  return ok && magic == 0xBEEFC0DEu;
}

[[noreturn]] void lmdb_fail(const std::string& path, const char* what, int rc, const char* todo) {
  raise(kExitData, "LMDB %s: %s failed: %s; %s", path.c_str(), what, mdb_strerror(rc), todo);
}

}  // namespace

// Several LMDB files may share a directory when opened by file name, so only data.mdb (or a directory) maps
// to the directory's cnntrain_meta.txt.
std::string lmdb_meta_path(const std::string& path) {
  if (is_dir(path)) return path + "/cnntrain_meta.txt";
  size_t s = path.find_last_of('/');
  std::string base = s == std::string::npos ? path : path.substr(s + 1);
  return base == "data.mdb" ? parent_dir(path) + "/cnntrain_meta.txt" : path + ".cnntrain_meta.txt";
}

bool looks_like_lmdb(const std::string& path) {
  return file_has_lmdb_magic(is_dir(path) ? path + "/data.mdb" : path);
}

LmdbReadEnv::LmdbReadEnv(const std::string& path) : path_(path) {
  const bool dir = is_dir(path);
  const std::string file = dir ? path + "/data.mdb" : path;
  meta_path_ = lmdb_meta_path(path);
  struct stat st;
  if (stat(file.c_str(), &st) != 0)
    raise(kExitData, "LMDB %s: cannot open %s: %s; give an LMDB directory (holding data.mdb) or its data.mdb",
          path.c_str(), file.c_str(), std::strerror(errno));
  if (!file_has_lmdb_magic(file))
    raise(kExitData, "%s is not an LMDB database (no LMDB magic number in %s); check the path and "
          "--data.format", path.c_str(), file.c_str());
  int rc = mdb_env_create(&env_);
  if (rc) lmdb_fail(path_, "mdb_env_create", rc, "out of memory?");
  unsigned flags = MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | (dir ? 0 : MDB_NOSUBDIR);
  rc = mdb_env_open(env_, dir ? path.c_str() : file.c_str(), flags, 0664);
  if (rc) {
    mdb_env_close(env_);
    env_ = nullptr;
    lmdb_fail(path_, "mdb_env_open", rc, "check that the file is a complete, readable LMDB");
  }
  MDB_txn* txn;
  rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  if (rc) {
    mdb_env_close(env_);
    lmdb_fail(path_, "mdb_txn_begin", rc, "check that the file is a complete, readable LMDB");
  }
  MDB_dbi dbi;
  rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
  mdb_txn_abort(txn);
  if (rc) {
    mdb_env_close(env_);
    lmdb_fail(path_, "mdb_dbi_open", rc, "check that the file is a complete, readable LMDB");
  }
  dbi_ = dbi;
}

LmdbReadEnv::~LmdbReadEnv() {
  if (env_) mdb_env_close(env_);
}

uint64_t LmdbReadEnv::entries() const {
  MDB_stat st;
  int rc = mdb_env_stat(env_, &st);
  if (rc) lmdb_fail(path_, "mdb_env_stat", rc, "check that the file is a complete, readable LMDB");
  return st.ms_entries;
}

LmdbReadEnv::Txn::Txn(const LmdbReadEnv& env) : env_(env) {
  int rc = mdb_txn_begin(env.env_, nullptr, MDB_RDONLY, &txn_);
  if (rc) lmdb_fail(env.path_, "mdb_txn_begin", rc, "check that the file is a complete, readable LMDB");
}

LmdbReadEnv::Txn::~Txn() { mdb_txn_abort(txn_); }

bool LmdbReadEnv::Txn::get(const void* key, size_t key_len, const uint8_t** val, size_t* val_len) {
  MDB_val k{key_len, const_cast<void*>(key)}, v;
  int rc = mdb_get(txn_, env_.dbi_, &k, &v);
  if (rc == MDB_NOTFOUND) return false;
  if (rc) lmdb_fail(env_.path_, "mdb_get", rc, "the database may be corrupt; rebuild it");
  *val = static_cast<const uint8_t*>(v.mv_data);
  *val_len = v.mv_size;
  return true;
}

void LmdbReadEnv::Txn::for_each(
    const std::function<bool(const std::string& key, const uint8_t* val, size_t len)>& fn) {
  MDB_cursor* cur;
  int rc = mdb_cursor_open(txn_, env_.dbi_, &cur);
  if (rc) lmdb_fail(env_.path_, "mdb_cursor_open", rc, "the database may be corrupt; rebuild it");
  // fn may throw; read-only transactions do not free their cursors.
  struct CursorCloser {
    MDB_cursor* c;
    ~CursorCloser() { mdb_cursor_close(c); }
  } closer{cur};
  MDB_val k, v;
  std::string key;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    key.assign(static_cast<const char*>(k.mv_data), k.mv_size);
    if (!fn(key, static_cast<const uint8_t*>(v.mv_data), v.mv_size)) break;
  }
  if (rc != 0 && rc != MDB_NOTFOUND)
    lmdb_fail(env_.path_, "mdb_cursor_get", rc, "the database may be corrupt; rebuild it");
}

// 64 MiB covers small datasets without any regrowth; larger ones double a handful of times.
LmdbWriter::LmdbWriter(const std::string& dir, bool overwrite) : dir_(dir), map_size_(64ull << 20) {
  if (mkdir(dir.c_str(), 0775) != 0 && errno != EEXIST)
    raise(kExitData, "cannot create LMDB directory %s: %s", dir.c_str(), std::strerror(errno));
  if (!is_dir(dir)) raise(kExitData, "%s exists and is not a directory; choose another output path", dir.c_str());
  const std::string data = dir + "/data.mdb";
  struct stat st;
  if (stat(data.c_str(), &st) == 0) {
    if (!overwrite)
      raise(kExitUsage, "%s already exists; pass --overwrite to replace it, or choose another output directory",
            data.c_str());
    std::remove(data.c_str());
    std::remove((dir + "/lock.mdb").c_str());
  }
  int rc = mdb_env_create(&env_);
  if (rc) lmdb_fail(dir_, "mdb_env_create", rc, "out of memory?");
  // A constructor that throws runs no destructor: close the environment on every failure path here.
  auto fail = [&](const char* what, int code, const char* todo) {
    mdb_env_close(env_);
    env_ = nullptr;
    lmdb_fail(dir_, what, code, todo);
  };
  mdb_env_set_mapsize(env_, map_size_);
  rc = mdb_env_open(env_, dir.c_str(), 0, 0664);
  if (rc) fail("mdb_env_open", rc, "check that the directory is writable");
  MDB_txn* txn;
  rc = mdb_txn_begin(env_, nullptr, 0, &txn);
  if (rc) fail("mdb_txn_begin", rc, "check free disk space");
  MDB_dbi dbi;
  rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
  if (rc) {
    mdb_txn_abort(txn);
    fail("mdb_dbi_open", rc, "check free disk space");
  }
  rc = mdb_txn_commit(txn);
  if (rc) fail("mdb_txn_commit", rc, "check free disk space");
  dbi_ = dbi;
}

LmdbWriter::~LmdbWriter() {
  if (env_) mdb_env_close(env_);  // an unfinished writer drops its pending batch
}

void LmdbWriter::put(const std::string& key, const std::string& value) {
  pending_bytes_ += key.size() + value.size();
  pending_.emplace_back(key, value);
  ++count_;
  if (pending_.size() >= 1000 || pending_bytes_ >= (32u << 20)) commit_pending();
}

void LmdbWriter::commit_pending() {
  for (;;) {
    MDB_txn* txn;
    int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    if (rc) lmdb_fail(dir_, "mdb_txn_begin", rc, "check free disk space");
    // Keys arriving in sorted order (all of cnntrain's converters) are appended: no page splits, so pages
    // end up full and the file ~20% smaller. Unsorted keys take the normal path.
    std::string last = last_key_;
    std::string dup;
    for (auto& kv : pending_) {
      MDB_val k{kv.first.size(), &kv.first[0]}, v{kv.second.size(), &kv.second[0]};
      const bool append = kv.first > last;
      rc = mdb_put(txn, dbi_, &k, &v, append ? MDB_APPEND : MDB_NOOVERWRITE);
      if (rc == MDB_KEYEXIST) dup = kv.first;
      if (rc) break;
      if (append) last = kv.first;
    }
    if (rc == 0) rc = mdb_txn_commit(txn);
    else mdb_txn_abort(txn);
    if (rc == 0) {
      last_key_ = last;
      break;
    }
    if (rc == MDB_KEYEXIST)
      raise(kExitData, "LMDB %s: key '%s' written twice; every record needs its own key", dir_.c_str(),
            dup.c_str());
    if (rc != MDB_MAP_FULL) lmdb_fail(dir_, "writing records", rc, "check free disk space");
    map_size_ *= 2;
    rc = mdb_env_set_mapsize(env_, map_size_);
    if (rc) lmdb_fail(dir_, "mdb_env_set_mapsize", rc, "check free disk space and address space limits");
  }
  pending_.clear();
  pending_bytes_ = 0;
}

void LmdbWriter::finish() {
  if (!pending_.empty()) commit_pending();
  int rc = mdb_env_sync(env_, 1);
  if (rc) lmdb_fail(dir_, "mdb_env_sync", rc, "check free disk space");
}

}  // namespace cnn
