// A binary min-heap whose push and pop move elements exactly as CPython's heapq
// does. The original simulator orders events by (time, kind) only, so the order
// in which equal keys come out is heapq's, and it decides who rendezvouses first.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace bamboo::sim {

template <class T, class Less>
class py_heap {
public:
  explicit py_heap(Less less = Less{}) : less_(less) {}

  void push(T item) {
    items_.push_back(std::move(item));
    sift_down(0, items_.size() - 1);
  }

  T pop() {
    T last = std::move(items_.back());
    items_.pop_back();
    if (items_.empty())
      return last;
    T top = std::move(items_[0]);
    items_[0] = std::move(last);
    sift_up(0);
    return top;
  }

  const T& top() const { return items_.front(); }
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }

private:
  // heapq._siftdown: move the item at pos up towards start.
  void sift_down(std::size_t start, std::size_t pos) {
    T item = std::move(items_[pos]);
    while (pos > start) {
      std::size_t parent = (pos - 1) >> 1;
      if (less_(item, items_[parent])) {
        items_[pos] = std::move(items_[parent]);
        pos = parent;
        continue;
      }
      break;
    }
    items_[pos] = std::move(item);
  }

  // heapq._siftup: bubble the smaller child up to a leaf, then sift down.
  void sift_up(std::size_t pos) {
    const std::size_t end = items_.size(), start = pos;
    T item = std::move(items_[pos]);
    std::size_t child = 2 * pos + 1;
    while (child < end) {
      std::size_t right = child + 1;
      if (right < end && !less_(items_[child], items_[right]))
        child = right;
      items_[pos] = std::move(items_[child]);
      pos = child;
      child = 2 * pos + 1;
    }
    items_[pos] = std::move(item);
    sift_down(start, pos);
  }

  std::vector<T> items_;
  Less less_;
};

} // namespace bamboo::sim
