#include "model/safetensors_torch.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "core/file_io.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian bytes; a big-endian host would need byte swapping");

namespace meshrl::model {
namespace {

// A read-only mapping of a whole file, unmapped on destruction.
class MappedFile {
 public:
  ~MappedFile() {
    if (data_ != nullptr && size_ > 0) ::munmap(data_, size_);
  }
  Status open(const std::filesystem::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return errno == ENOENT ? not_found("[safetensors] " + path.string() + " does not exist")
                             : io_error("[safetensors] cannot open " + path.string() + ": " + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return io_error("[safetensors] " + path.string() + " is not a regular file");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        std::string err = std::strerror(errno);
        ::close(fd);
        size_ = 0;
        return io_error("[safetensors] cannot map " + path.string() + ": " + err);
      }
      data_ = p;
    }
    ::close(fd);
    return Status::ok();
  }
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

torch::ScalarType dtype_to_torch(Dtype dtype) {
  switch (dtype) {
    case Dtype::F32: return torch::kFloat32;
    case Dtype::F16: return torch::kFloat16;
    case Dtype::BF16: return torch::kBFloat16;
    case Dtype::F64: return torch::kFloat64;
    case Dtype::I64: return torch::kInt64;
    case Dtype::I32: return torch::kInt32;
    case Dtype::I16: return torch::kInt16;
    case Dtype::I8: return torch::kInt8;
    case Dtype::U8: return torch::kUInt8;
    case Dtype::BOOL: return torch::kBool;
  }
  return torch::kFloat32;  // unreachable
}

std::optional<Dtype> dtype_from_torch(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32: return Dtype::F32;
    case torch::kFloat16: return Dtype::F16;
    case torch::kBFloat16: return Dtype::BF16;
    case torch::kFloat64: return Dtype::F64;
    case torch::kInt64: return Dtype::I64;
    case torch::kInt32: return Dtype::I32;
    case torch::kInt16: return Dtype::I16;
    case torch::kInt8: return Dtype::I8;
    case torch::kUInt8: return Dtype::U8;
    case torch::kBool: return Dtype::BOOL;
    default: return std::nullopt;
  }
}

Result<SafetensorsContents> read_safetensors_with_metadata(const std::filesystem::path& path) {
  MappedFile file;
  MESHRL_RETURN_IF_ERROR(file.open(path));
  std::string_view bytes = file.bytes();
  MESHRL_ASSIGN_OR_RETURN(auto header, parse_safetensors(bytes, path.string()));
  SafetensorsContents out;
  out.metadata = std::move(header.metadata);
  const char* data = bytes.data() + header.data_offset;
  for (const auto& e : header.tensors) {
    const char* src = data + e.begin;
    if (e.dtype == Dtype::BOOL) {
      // Any byte but 0/1 in a torch bool is undefined behaviour downstream.
      for (uint64_t i = 0; i < e.n_bytes(); ++i)
        if (static_cast<unsigned char>(src[i]) > 1)
          return data_loss("[safetensors] " + path.string() + ": tensor '" + e.name + "', field 'data': BOOL byte " +
                           std::to_string(static_cast<unsigned char>(src[i])) + " at element " + std::to_string(i) +
                           " is not 0 or 1");
    }
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(dtype_to_torch(e.dtype)));
    if (e.n_bytes() > 0) std::memcpy(t.data_ptr(), src, e.n_bytes());
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

Result<std::map<std::string, torch::Tensor>> read_safetensors(const std::filesystem::path& path) {
  MESHRL_ASSIGN_OR_RETURN(auto contents, read_safetensors_with_metadata(path));
  return std::move(contents.tensors);
}

Result<std::string> safetensors_bytes(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                                      const std::map<std::string, std::string>& metadata) {
  std::vector<torch::Tensor> keep;  // contiguous CPU copies, alive while their bytes are borrowed
  std::vector<TensorBytes> views;
  keep.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) return invalid_argument("[safetensors] tensor '" + name + "' is undefined");
    auto dtype = dtype_from_torch(t.scalar_type());
    if (!dtype)
      return invalid_argument("[safetensors] tensor '" + name + "' has dtype " +
                              std::string(c10::toString(t.scalar_type())) + ", which safetensors files here cannot hold");
    auto c = t.detach().to(torch::kCPU).contiguous();
    keep.push_back(c);
    const char* p = static_cast<const char*>(c.data_ptr());
    views.push_back({name, *dtype, c.sizes().vec(), std::string_view(p, c.numel() * c.element_size())});
  }
  return build_safetensors_file(views, metadata);
}

Status write_safetensors(const std::filesystem::path& path,
                         const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  MESHRL_ASSIGN_OR_RETURN(auto file, safetensors_bytes(tensors, metadata));
  return write_file_atomic(path, file);
}

}  // namespace meshrl::model
