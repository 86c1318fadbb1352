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

Expected<int> open_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return error(ErrorCode::io_error, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return error(ErrorCode::io_error, "cannot stat ", path, ": ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return error(ErrorCode::io_error, path, " is not a regular file (",
                 S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket",
                 "); rlx reads models only from regular files");
  }
  // back to blocking reads (O_NONBLOCK has no effect on a regular file's reads, but a later
  // fcntl user should see the usual flags)
  (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Status require_regular_file(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(int fd, open_regular_file(path));
  ::close(fd);
  return Status::ok();
}

Expected<std::string> read_regular_file(const std::string& path, uint64_t max_bytes) {
  RLX_ASSIGN_OR_RETURN(int fd, open_regular_file(path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return error(ErrorCode::io_error, "cannot stat ", path, ": ", std::strerror(e));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return error(ErrorCode::format_error, path, ": ", st.st_size, " bytes, more than the ", max_bytes, " rlx reads from such a file");
  }
  std::string data;
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int e = errno;
      ::close(fd);
      return error(ErrorCode::io_error, "cannot read ", path, ": ", std::strerror(e));
    }
    if (got == 0) break;
    if (data.size() + static_cast<uint64_t>(got) > max_bytes) {
      ::close(fd);
      return error(ErrorCode::format_error, path, ": more than the ", max_bytes, " bytes rlx reads from such a file");
    }
    data.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return data;
}

Status write_file_via_rename(const std::string& path, const std::function<Status(std::FILE*, const std::string& tmp)>& write) {
  const std::string tmp = cat(path, ".tmp-", ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return error(ErrorCode::io_error, "cannot create ", tmp, ": ", std::strerror(errno));
  Status s = write(f, tmp);
  const int e = errno;
  if (std::fclose(f) != 0 && s) s = error(ErrorCode::io_error, "cannot write ", tmp, ": ", std::strerror(e));
  if (s && std::rename(tmp.c_str(), path.c_str()) != 0)
    s = error(ErrorCode::io_error, "cannot rename ", tmp, " to ", path, ": ", std::strerror(errno));
  if (!s) std::remove(tmp.c_str());
  return s;
}

Expected<std::shared_ptr<Storage>> map_file(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(int fd, open_regular_file(path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return error(ErrorCode::io_error, "cannot stat ", path, ": ", std::strerror(e));
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
