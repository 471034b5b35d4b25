// Thin RAII layer over liblmdb: opening a database read-only from a directory or a data.mdb file, and a
// writer that grows the map as it fills. Every failure is a cnn::Error(kExitData) naming the path.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

struct MDB_env;
struct MDB_txn;

namespace cnn {

// True when `path` is an LMDB directory (holding data.mdb) or an LMDB data file, judged by the meta page's
// magic number, so a wrong extension or a stray lock.mdb does not matter.
bool looks_like_lmdb(const std::string& path);

// Read-only environment. MDB_NOLOCK: datasets are not written while training reads them, and the directory
// may be read-only (shared dataset storage), where LMDB could not create lock.mdb. MDB_NOTLS lets loader
// threads hold transactions independently of the thread that opened the environment.
std::string lmdb_meta_path(const std::string& path);

class LmdbReadEnv {
 public:
  explicit LmdbReadEnv(const std::string& path);
  ~LmdbReadEnv();
  LmdbReadEnv(const LmdbReadEnv&) = delete;
  LmdbReadEnv& operator=(const LmdbReadEnv&) = delete;

  const std::string& path() const { return path_; }
  // Where cnntrain's metadata sidecar for this database lives (see io/lmdb_meta.h).
  const std::string& meta_path() const { return meta_path_; }
  uint64_t entries() const;

  // A read transaction over the main database; cheap to create (no lock table with MDB_NOLOCK).
  class Txn {
   public:
    explicit Txn(const LmdbReadEnv& env);
    ~Txn();
    Txn(const Txn&) = delete;
    Txn& operator=(const Txn&) = delete;
    // Value bytes of `key` (valid until the transaction ends); false when the key is absent.
    bool get(const void* key, size_t key_len, const uint8_t** val, size_t* val_len);
    // Visits every record in key order; stops early when fn returns false.
    void for_each(const std::function<bool(const std::string& key, const uint8_t* val, size_t len)>& fn);

   private:
    const LmdbReadEnv& env_;
    MDB_txn* txn_ = nullptr;
  };

 private:
  std::string path_, meta_path_;
  MDB_env* env_ = nullptr;
  unsigned dbi_ = 0;
};

// Writes key/value records in batched transactions. The map starts small and doubles when full, replaying the
// pending batch, so callers need no size estimate. A key written twice is an error. Records are visible once
// finish() returns.
class LmdbWriter {
 public:
  // Creates `dir` (which must not already hold a database unless overwrite is set).
  LmdbWriter(const std::string& dir, bool overwrite = false);
  ~LmdbWriter();
  LmdbWriter(const LmdbWriter&) = delete;
  LmdbWriter& operator=(const LmdbWriter&) = delete;

  void put(const std::string& key, const std::string& value);
  void finish();
  int64_t count() const { return count_; }

 private:
  void commit_pending();
  std::string dir_;
  MDB_env* env_ = nullptr;
  unsigned dbi_ = 0;
  uint64_t map_size_;
  std::string last_key_;  // largest key committed so far
  std::vector<std::pair<std::string, std::string>> pending_;
  size_t pending_bytes_ = 0;
  int64_t count_ = 0;
};

}  // namespace cnn
