#include "remote/batch_stream_sink.hpp"

#include "base/try.hpp"

namespace opcache::remote {

BatchStreamSink::BatchStreamSink(const std::vector<std::string>& keys, BatchReceiver& receiver)
    : m_keys(keys), m_wanted(keys.begin(), keys.end()), m_receiver(receiver) {}

Status BatchStreamSink::frame(const StreamFrame& frame) {
  if (m_receiver.stopping()) {
    return Error::remote("the batch fetch was cancelled");
  }
  m_file.reset();
  const bool wanted = m_wanted.count(frame.key) != 0 && m_answered.count(frame.key) == 0;
  if (!wanted) {
    return {};  // an end frame, a key not asked for, or a frame repeated by a retried response
  }
  switch (frame.status) {
    case StreamFrame::Status::hit: {
      OPCACHE_TRY_ASSIGN(auto file, m_receiver.create_file());
      m_file.emplace(std::move(file));
      m_key = frame.key;
      m_signatures = frame.signatures;
      return {};
    }
    case StreamFrame::Status::miss:
    case StreamFrame::Status::revoked:
      m_answered.insert(frame.key);
      m_receiver.absent(frame.key, frame.status == StreamFrame::Status::miss ? Fetched::miss : Fetched::revoked);
      return {};
    case StreamFrame::Status::too_large:
      m_answered.insert(frame.key);  // not pending: fetched alone
      m_too_large.push_back(frame.key);
      return {};
    case StreamFrame::Status::later:
    case StreamFrame::Status::end:
      return {};
  }
  return {};
}

Status BatchStreamSink::bundle_bytes(const char* data, std::size_t size) {
  return m_file ? m_file->write(data, size) : Status{};
}

Status BatchStreamSink::bundle_end() {
  if (!m_file) {
    return {};
  }
  m_answered.insert(m_key);
  base::AtomicFile file = std::move(*m_file);
  m_file.reset();
  m_receiver.received(m_key, std::move(file), std::move(m_signatures));
  m_signatures.clear();
  return {};
}

void BatchStreamSink::abandon_bundle() noexcept { m_file.reset(); }

std::vector<std::string> BatchStreamSink::pending() const {
  std::vector<std::string> keys;
  for (const auto& key : m_keys) {
    if (m_answered.count(key) == 0) {
      keys.push_back(key);
    }
  }
  return keys;
}

}  // namespace opcache::remote
