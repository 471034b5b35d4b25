#include "io/h5_util.h"

#include "src/base/error.h"

namespace cnn {

std::mutex& h5_mutex() {
  static std::mutex mu;
  return mu;
}

void h5_quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {
herr_t walk_cb(unsigned n, const H5E_error2_t* e, void* data) {
  auto* s = static_cast<std::string*>(data);
  if (n == 0 && e->desc) *s = e->desc;  // innermost frame: the root cause
  return 0;
}

bool attr_open(hid_t obj, const char* name, H5Handle& a) {
  if (H5Aexists(obj, name) <= 0) return false;
  a = h5_attr(H5Aopen(obj, name, H5P_DEFAULT));
  return a.valid();
}

hssize_t attr_len(hid_t attr) {
  H5Handle sp = h5_space(H5Aget_space(attr));
  return H5Sget_simple_extent_npoints(sp.get());
}

void attr_write(hid_t obj, const char* name, hid_t mem_type, hid_t file_type, size_t n, const void* data) {
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  hsize_t dims[1] = {n};
  H5Handle sp = h5_space(n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, nullptr));
  H5Handle a = h5_attr(H5Acreate2(obj, name, file_type, sp.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!a.valid() || H5Awrite(a.get(), mem_type, data) < 0)
    raise(kExitFailure, "cannot write HDF5 attribute '%s': %s", name, h5_last_error().c_str());
}
}  // namespace

std::string h5_last_error() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_cb, &s);
  return s;
}

bool h5_read_attr_ints(hid_t obj, const char* name, std::vector<long long>& out) {
  H5Handle a;
  if (!attr_open(obj, name, a)) return false;
  out.resize(attr_len(a.get()));
  return H5Aread(a.get(), H5T_NATIVE_LLONG, out.data()) >= 0;
}

bool h5_read_attr_floats(hid_t obj, const char* name, std::vector<double>& out) {
  H5Handle a;
  if (!attr_open(obj, name, a)) return false;
  out.resize(attr_len(a.get()));
  return H5Aread(a.get(), H5T_NATIVE_DOUBLE, out.data()) >= 0;
}

bool h5_read_attr_strings(hid_t obj, const char* name, std::vector<std::string>& out) {
  H5Handle a;
  if (!attr_open(obj, name, a)) return false;
  H5Handle ftype = h5_type(H5Aget_type(a.get()));
  if (H5Tget_class(ftype.get()) != H5T_STRING) return false;
  size_t n = static_cast<size_t>(attr_len(a.get()));
  out.clear();
  if (H5Tis_variable_str(ftype.get()) > 0) {
    H5Handle mt = h5_type(H5Tcopy(H5T_C_S1));
    H5Tset_size(mt.get(), H5T_VARIABLE);
    H5Tset_cset(mt.get(), H5Tget_cset(ftype.get()));
    std::vector<char*> ptrs(n, nullptr);
    if (H5Aread(a.get(), mt.get(), ptrs.data()) < 0) return false;
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    H5Handle sp = h5_space(H5Aget_space(a.get()));
    H5Dvlen_reclaim(mt.get(), sp.get(), H5P_DEFAULT, ptrs.data());
  } else {
    size_t len = H5Tget_size(ftype.get());
    std::vector<char> buf(n * len + 1, 0);
    if (H5Aread(a.get(), ftype.get(), buf.data()) < 0) return false;
    for (size_t i = 0; i < n; ++i) {
      std::string s(&buf[i * len], len);
      out.push_back(s.substr(0, s.find('\0')));
    }
  }
  return true;
}

void h5_write_attr_ints(hid_t obj, const char* name, const std::vector<long long>& v) {
  attr_write(obj, name, H5T_NATIVE_LLONG, H5T_STD_I64LE, v.size(), v.data());
}

void h5_write_attr_floats(hid_t obj, const char* name, const std::vector<double>& v) {
  attr_write(obj, name, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, v.size(), v.data());
}

void h5_write_attr_strings(hid_t obj, const char* name, const std::vector<std::string>& v) {
  H5Handle t = h5_type(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  std::vector<const char*> ptrs;
  for (const auto& s : v) ptrs.push_back(s.c_str());
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  hsize_t dims[1] = {v.size()};
  // One string is stored as a scalar, so h5py reads it as a plain str.
  H5Handle sp = h5_space(v.size() == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, nullptr));
  H5Handle a = h5_attr(H5Acreate2(obj, name, t.get(), sp.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!a.valid() || H5Awrite(a.get(), t.get(), ptrs.data()) < 0)
    raise(kExitFailure, "cannot write HDF5 attribute '%s': %s", name, h5_last_error().c_str());
}

}  // namespace cnn
