/* The one growth rule (proto/array_grow.c, array_reserve): capacity
 * doubles from the first size until the need fits, a need already met
 * changes nothing, and a failed realloc or a size that would overflow
 * leaves the array and its capacity as they were, still usable (squashd's
 * process watch once lost its watched processes that way). realloc is
 * wrapped (-Wl,--wrap=realloc, tests/Makefile.am) so that a test can make
 * the next call fail. */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "array_grow.h"
#include "unit.h"

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);

static bool fail_next;
static unsigned reallocs;

void *__wrap_realloc(void *p, size_t n)
{
	reallocs++;
	if (fail_next) {
		fail_next = false;
		return NULL;
	}
	return __real_realloc(p, n);
}

int main(void)
{
	int *a = NULL;
	size_t cap = 0;

	/* From nothing: the first size, then doubling as elements come. */
	CHECK_INT(array_reserve(&a, &cap, 1, sizeof(*a), 4), 0);
	CHECK_INT(cap, 4);
	CHECK(a != NULL);
	for (int i = 0; i < 4; i++)
		a[i] = i;
	CHECK_INT(array_reserve(&a, &cap, 5, sizeof(*a), 4), 0);
	CHECK_INT(cap, 8);
	CHECK_INT(a[3], 3);

	/* A need that fits asks for nothing. */
	unsigned before = reallocs;
	CHECK_INT(array_reserve(&a, &cap, 8, sizeof(*a), 4), 0);
	CHECK_INT(reallocs, before);

	/* A need far past the capacity doubles as often as it takes. */
	CHECK_INT(array_reserve(&a, &cap, 33, sizeof(*a), 4), 0);
	CHECK_INT(cap, 64);
	CHECK_INT(a[3], 3);

	/* realloc fails: the array and its capacity are unchanged. */
	int *kept = a;
	fail_next = true;
	errno = 0;
	CHECK_INT(array_reserve(&a, &cap, 65, sizeof(*a), 4), -1);
	CHECK_INT(errno, ENOMEM);
	CHECK(a == kept);
	CHECK_INT(cap, 64);
	CHECK_INT(a[3], 3);
	a[63] = 63; /* still the caller's, whole */

	/* ... and the next call grows it as if nothing had happened. */
	CHECK_INT(array_reserve(&a, &cap, 65, sizeof(*a), 4), 0);
	CHECK_INT(cap, 128);
	CHECK_INT(a[63], 63);

	/* Sizes that would overflow are refused before any realloc. */
	before = reallocs;
	errno = 0;
	CHECK_INT(array_reserve(&a, &cap, SIZE_MAX, sizeof(*a), 4), -1);
	CHECK_INT(errno, ENOMEM);
	CHECK_INT(array_reserve(&a, &cap, SIZE_MAX / 2, sizeof(*a), 4), -1);
	CHECK_INT(reallocs, before);
	CHECK_INT(cap, 128);
	CHECK_INT(a[63], 63);

	/* No element size is a caller's mistake, not a growth. */
	errno = 0;
	CHECK_INT(array_reserve(&a, &cap, 129, 0, 4), -1);
	CHECK_INT(errno, EINVAL);

	/* A first size of 0 still grows. */
	char *s = NULL;
	size_t scap = 0;
	CHECK_INT(array_reserve(&s, &scap, 3, 1, 0), 0);
	CHECK(scap >= 3);

	free(s);
	free(a);
	return unit_exit_code();
}
