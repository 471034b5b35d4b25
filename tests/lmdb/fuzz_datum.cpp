// Robustness harness for everything that parses bytes from an LMDB: the Datum header scan, the protobuf
// parse, raw pixel checks, the JPEG/PNG decoders and, end to end, LmdbDataset over databases of mutated
// records. Built with AddressSanitizer + UBSan (tests/lmdb/fuzz.mk); passing means no sanitizer report, no
// crash, and scan_datum accepting exactly the bytes protobuf accepts, with the same field values.
//   usage: fuzz_datum [cases=20000] [seed=1]
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/image_codec.h"
#include "io/lmdb_dataset.h"
#include "io/lmdb_datum.h"
#include "io/lmdb_env.h"
#include "src/base/error.h"

namespace {

using cnn::Datum;
using cnn::DatumHeader;

std::vector<std::string> seed_corpus() {
  std::vector<std::string> corpus;
  std::vector<uint8_t> img(12 * 10 * 3);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<uint8_t>(i * 7);
  corpus.push_back(cnn::serialize_datum(cnn::make_raw_datum(img.data(), 12, 10, 3, 5)));
  corpus.push_back(cnn::serialize_datum(cnn::make_raw_datum(img.data(), 6, 5, 1, 0)));
  Datum f;
  f.channels = 1, f.height = 2, f.width = 2, f.label = 3, f.has_label = true;
  f.float_data = {0, 1, 2, 255};
  corpus.push_back(cnn::serialize_datum(f));
  corpus.push_back(cnn::serialize_datum(cnn::make_encoded_datum(cnn::encode_jpeg(img.data(), 12, 10, 3), 1)));
  corpus.push_back(cnn::serialize_datum(cnn::make_encoded_datum(cnn::encode_png(img.data(), 12, 10, 3), 2)));
  corpus.push_back(cnn::serialize_datum(cnn::make_encoded_datum(cnn::encode_jpeg(img.data(), 6, 20, 1), 1)));
  return corpus;
}

std::string mutate(std::string s, std::mt19937_64& rng) {
  auto below = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds; ++r) {
    switch (rng() % 8) {
      case 0:
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1: {
        static const uint8_t special[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x22, 0x28, 0x38, 0x0b, 0x0c};
        if (!s.empty()) s[below(s.size())] = static_cast<char>(special[rng() % sizeof special]);
        break;
      }
      case 2: {
        std::string ins(1 + below(8), '\0');
        for (auto& ch : ins) ch = static_cast<char>(rng());
        s.insert(below(s.size() + 1), ins);
        break;
      }
      case 3:
        if (!s.empty()) {
          size_t at = below(s.size());
          s.erase(at, 1 + below(std::min<size_t>(16, s.size() - at)));
        }
        break;
      case 4: s.resize(below(s.size() + 1)); break;
      case 5:
        if (!s.empty()) {
          size_t at = below(s.size());
          s.insert(below(s.size() + 1), s.substr(at, 1 + below(32)));
        }
        break;
      case 6: s.insert(below(s.size() + 1), std::string(1 + below(11), '\xff')); break;
      default:  // a huge length prefix after a length-delimited tag
        for (size_t i = 0; i + 1 < s.size(); ++i)
          if (static_cast<uint8_t>(s[i]) == 0x22 && rng() % 2) {
            s.replace(i + 1, 1, "\xff\xff\xff\xff\x0f");
            break;
          }
    }
  }
  return s;
}

int failures = 0;
void check(bool ok, const char* what, size_t case_no) {
  if (!ok && failures++ < 20) std::fprintf(stderr, "fuzz_datum: case %zu: %s\n", case_no, what);
}

struct Tally {
  int64_t both = 0, scan_only = 0, parse_only = 0;
};

void exercise_record(const std::string& bytes, size_t case_no, Tally* tally) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(bytes.data());
  DatumHeader h;
  const bool scan_ok = cnn::scan_datum(p, bytes.size(), &h).empty();
  Datum d;
  const bool parse_ok = cnn::parse_datum(p, bytes.size(), &d);
  if (scan_ok) {
    check(h.data == nullptr || (h.data >= p && h.data + h.data_bytes <= p + bytes.size()),
          "scan data pointer outside the input", case_no);
  }
  // The open-time scan must accept exactly what protobuf accepts, or a bad record would slip past open.
  check(scan_ok == parse_ok, scan_ok ? "scan_datum accepts bytes protobuf rejects"
                                     : "protobuf accepts bytes scan_datum rejects", case_no);
  tally->scan_only += scan_ok && !parse_ok;
  tally->parse_only += parse_ok && !scan_ok;
  if (scan_ok && parse_ok) {
    ++tally->both;
    check(h.channels == d.channels && h.height == d.height && h.width == d.width, "shape differs", case_no);
    check(h.label == d.label && h.has_label == d.has_label, "label differs", case_no);
    check(h.encoded == d.encoded, "encoded flag differs", case_no);
    check(h.data_bytes == d.data.size(), "data size differs", case_no);
    check(h.float_count == d.float_data.size(), "float_data count differs", case_no);
  }
  if (!parse_ok) return;
  const uint8_t* data = reinterpret_cast<const uint8_t*>(d.data.data());
  if (d.encoded || cnn::sniff_image_format(data, d.data.size()) != cnn::ImageFormat::kUnknown) {
    cnn::Image img;
    int ih, iw, ic;
    cnn::probe_image(data, d.data.size(), &ih, &iw, &ic);
    for (int c : {0, 1, 3}) cnn::decode_image(data, d.data.size(), c, &img, 1 << 20);
    return;
  }
  h.channels = d.channels, h.height = d.height, h.width = d.width;
  h.data_bytes = d.data.size(), h.float_count = d.float_data.size();
  if (!cnn::check_raw_datum(h).empty()) return;
  const size_t n = static_cast<size_t>(d.channels) * d.height * d.width;
  std::vector<uint8_t> planar(n), hwc(n);
  const uint8_t* chw = data;
  if (d.data.empty()) {
    if (!cnn::float_datum_to_u8(d.float_data.data(), n, planar.data())) return;
    chw = planar.data();
  }
  cnn::datum_chw_to_hwc(chw, d.channels, d.height, d.width, hwc.data());
}

// Whole databases of mostly-mutated records through open + read in skip mode: errors are fine, crashes not.
void exercise_databases(const std::vector<std::string>& corpus, std::mt19937_64& rng, int dbs) {
  char tmpl[] = "/tmp/cnntrain_fuzz_XXXXXX";
  const std::string root = mkdtemp(tmpl);
  int opened = 0;
  for (int k = 0; k < dbs; ++k) {
    const std::string dir = root + "/db" + std::to_string(k);
    {
      cnn::LmdbWriter w(dir);
      const int n = 1 + static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i) {
        const std::string& base = corpus[rng() % corpus.size()];
        w.put(cnn::lmdb_record_key(i, "r"), rng() % 3 ? mutate(base, rng) : base);
      }
      w.finish();
    }
    for (const char* mode : {"skip", "fail"}) {
      try {
        cnn::LmdbOptions opt;
        opt.on_bad_sample = mode;
        opt.stats_samples = 2;
        if (rng() % 2) {
          opt.transform.height = opt.transform.width = 8;
          opt.transform.mode = rng() % 2 ? cnn::ResizeMode::kRandomResizedCrop : cnn::ResizeMode::kCenterCrop;
        }
        cnn::LmdbDataset ds(dir, opt);
        ++opened;
        std::vector<uint8_t> img(ds.info().sample_bytes());
        for (int64_t id = 0; id < ds.info().count; ++id) {
          int32_t label;
          ds.read(&id, 1, img.data(), &label);
          check(label >= 0 && label < ds.info().num_classes, "read label out of range", k);
        }
      } catch (const cnn::Error& e) {
        check(e.code() == cnn::kExitData || e.code() == cnn::kExitUsage, "unexpected error code", k);
      }
    }
    std::filesystem::remove_all(dir);
  }
  std::filesystem::remove_all(root);
  std::printf("fuzz_datum: %d databases, %d opened (the rest refused with a data error)\n", dbs, opened);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t cases = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000;
  std::mt19937_64 rng(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1);
  const auto corpus = seed_corpus();
  Tally tally;
  for (size_t i = 0; i < cases; ++i) {
    std::string bytes;
    if (i % 8 == 0) {
      bytes.resize(rng() % 64);
      for (auto& ch : bytes) ch = static_cast<char>(rng());
    } else {
      bytes = mutate(corpus[rng() % corpus.size()], rng);
    }
    exercise_record(bytes, i, &tally);
    // Mutated image files directly, not only inside Datums.
    if (i % 4 == 1) {
      Datum d;
      const std::string& base = corpus[3 + rng() % 3];
      if (cnn::parse_datum(base.data(), base.size(), &d)) {
        const std::string file = mutate(d.data, rng);
        cnn::Image img;
        cnn::decode_image(reinterpret_cast<const uint8_t*>(file.data()), file.size(), 0, &img, 1 << 20);
      }
    }
  }
  std::printf("fuzz_datum: %zu cases; accepted by scan_datum and protobuf: %lld, scan only: %lld, protobuf "
              "only: %lld\n", cases, static_cast<long long>(tally.both), static_cast<long long>(tally.scan_only),
              static_cast<long long>(tally.parse_only));
  exercise_databases(corpus, rng, static_cast<int>(std::max<size_t>(cases / 100, 20)));
  if (failures) {
    std::printf("fuzz_datum: %d FAILED checks\n", failures);
    return 1;
  }
  std::printf("fuzz_datum: OK\n");
  return 0;
}
