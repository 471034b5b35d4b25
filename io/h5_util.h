// Shared HDF5 plumbing. Debian's parallel HDF5 is not built thread-safe, so every HDF5 call made by this
// program (loader thread, evaluation, checkpoints) happens under h5_mutex(). Handles are RAII-wrapped.
#pragma once
#include <hdf5.h>

#include <mutex>
#include <string>
#include <vector>

namespace cnn {

std::mutex& h5_mutex();

// Turns off HDF5's own error-stack printing (errors are reported through cnn::Error instead).
void h5_quiet();

// The innermost message on HDF5's current error stack ("" when empty), e.g. "truncated file: eof = ...".
std::string h5_last_error();

class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  H5Handle(H5Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = -1; }
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      closer_ = o.closer_;
      o.id_ = -1;
    }
    return *this;
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  ~H5Handle() { reset(); }
  void reset() {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = -1;
  }
  // Closes now and reports the library's return code (collective closes must be checked).
  herr_t close() {
    herr_t rc = id_ >= 0 && closer_ ? closer_(id_) : 0;
    id_ = -1;
    return rc;
  }
  // Gives the identifier up without closing it: for collective objects that not every rank holds (closing
  // them on some ranks only would hang the others); the process then ends without closing them.
  void abandon() { id_ = -1; }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

inline H5Handle h5_file(hid_t id) { return H5Handle(id, H5Fclose); }
inline H5Handle h5_dataset(hid_t id) { return H5Handle(id, H5Dclose); }
inline H5Handle h5_space(hid_t id) { return H5Handle(id, H5Sclose); }
inline H5Handle h5_type(hid_t id) { return H5Handle(id, H5Tclose); }
inline H5Handle h5_attr(hid_t id) { return H5Handle(id, H5Aclose); }
inline H5Handle h5_plist(hid_t id) { return H5Handle(id, H5Pclose); }
inline H5Handle h5_group(hid_t id) { return H5Handle(id, H5Gclose); }

// Attribute helpers on an object (file, group or dataset); read_* return false when the attribute is absent.
bool h5_read_attr_ints(hid_t obj, const char* name, std::vector<long long>& out);
bool h5_read_attr_floats(hid_t obj, const char* name, std::vector<double>& out);
bool h5_read_attr_strings(hid_t obj, const char* name, std::vector<std::string>& out);
void h5_write_attr_ints(hid_t obj, const char* name, const std::vector<long long>& v);
void h5_write_attr_floats(hid_t obj, const char* name, const std::vector<double>& v);
void h5_write_attr_strings(hid_t obj, const char* name, const std::vector<std::string>& v);

}  // namespace cnn
