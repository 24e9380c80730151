#include "config.h"
#include "core/gc_window.h"

size_t gc_window(const uint32_t *ids, const uint32_t *steps, size_t n, size_t *cursor,
		 uint32_t *out_ids, uint32_t *out_steps, size_t max)
{
	size_t take = n < max ? n : max, start = n ? *cursor % n : 0;

	for (size_t k = 0; k < take; k++) {
		out_ids[k] = ids[(start + k) % n];
		if (steps && out_steps)
			out_steps[k] = steps[(start + k) % n];
	}
	*cursor = n ? (start + take) % n : 0;
	return take;
}
