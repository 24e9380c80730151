/* Growing arrays by doubling (array_grow.h). */
#include "config.h"

#include "array_grow.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int array_reserve(void *array, size_t *cap, size_t need, size_t each, size_t first)
{
	size_t grown = *cap ? *cap : (first ? first : 1);
	void *old, *more;

	if (need <= *cap)
		return 0;
	if (each == 0) {
		errno = EINVAL;
		return -1;
	}
	while (grown < need) {
		if (grown > SIZE_MAX / 2) {
			errno = ENOMEM;
			return -1;
		}
		grown *= 2;
	}
	if (grown > SIZE_MAX / each) {
		errno = ENOMEM;
		return -1;
	}
	/* The caller's T *, read and written as bytes: a T ** is not a void **. */
	memcpy(&old, array, sizeof(old));
	more = realloc(old, grown * each);
	if (!more) {
		errno = ENOMEM;
		return -1;
	}
	memcpy(array, &more, sizeof(more));
	*cap = grown;
	return 0;
}
