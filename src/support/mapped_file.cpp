#include "rlx/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rlx {
namespace {

class MappedStorage final : public Storage {
 public:
  MappedStorage(void* p, size_t n) : p_(static_cast<uint8_t*>(p)), n_(n) {}
  ~MappedStorage() override {
    if (p_ && n_) munmap(p_, n_);
  }
  uint8_t* data() override { return p_; }
  size_t size() const override { return n_; }

 private:
  uint8_t* p_;
  size_t n_;
};

}  // namespace

Expected<std::shared_ptr<Storage>> map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error(ErrorCode::io_error, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return error(ErrorCode::io_error, "cannot stat ", path, ": ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return error(ErrorCode::io_error, path, " is not a regular file");
  }
  const size_t n = static_cast<size_t>(st.st_size);
  if (n == 0) {
    ::close(fd);
    return std::shared_ptr<Storage>(std::make_shared<MappedStorage>(nullptr, 0));
  }
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return error(ErrorCode::io_error, "cannot map ", path, ": ", std::strerror(e));
  return std::shared_ptr<Storage>(std::make_shared<MappedStorage>(p, n));
}

}  // namespace rlx
