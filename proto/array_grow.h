/* The one growth rule for the arrays squashd and the plugin build up as
 * they go (connections, users, watched processes, job images, mount
 * points): double the capacity when full, starting from a first size.
 * Written once so that every place checks the multiplication for
 * overflow and keeps its array when realloc fails. */
#ifndef SQUASH_ARRAY_GROW_H
#define SQUASH_ARRAY_GROW_H

#include <stddef.h>

/* Makes room for need elements of each bytes in *array (a T ** passed as
 * void *), whose capacity is *cap: doubles *cap from first (or from its
 * current value) until it holds need, and reallocates. 0 on success, or
 * -1 with errno ENOMEM (EINVAL if each is 0): then *array and *cap are
 * unchanged, still the caller's to use and free. New elements are not
 * initialised. */
int array_reserve(void *array, size_t *cap, size_t need, size_t each, size_t first);

#endif
