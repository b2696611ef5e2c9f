// One {value, name} table per IR enum (ir.cpp): the name of a value and the value of a name are
// both read from it, so a new enumerator is one table line (as collective_table.cpp does for the
// collectives), and constexpr checks catch a duplicate name or a value listed twice.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace zerosim::detail {

template <class E>
struct Named {
    E value;
    const char* name;
};

template <class E, std::size_t N>
const char* name_in(const Named<E> (&table)[N], E value) {
    for (const Named<E>& e : table)
        if (e.value == value) return e.name;
    return "?";
}

template <class E, std::size_t N>
std::optional<E> value_named(const Named<E> (&table)[N], std::string_view name) {
    for (const Named<E>& e : table)
        if (name == e.name) return e.value;
    return std::nullopt;
}

// Entry i holds enumerator i (so every value 0..N-1 has exactly one entry) and no two entries
// share a name: the tables are checked when ir.cpp compiles.
template <class Entry, std::size_t N, class Value, class Name>
constexpr bool dense_and_unique(const Entry (&table)[N], Value value_of, Name name_of) {
    for (std::size_t i = 0; i < N; ++i) {
        if (static_cast<std::size_t>(value_of(table[i])) != i) return false;
        for (std::size_t j = 0; j < i; ++j)
            if (std::string_view(name_of(table[i])) == std::string_view(name_of(table[j]))) return false;
    }
    return true;
}

template <class E, std::size_t N>
constexpr bool dense_and_unique(const Named<E> (&table)[N]) {
    return dense_and_unique(table, [](const Named<E>& e) { return e.value; }, [](const Named<E>& e) { return e.name; });
}

}  // namespace zerosim::detail
