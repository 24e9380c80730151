/* Which records a gc pass asks about (daemon/core/gc_window.c): at most
 * the batch, from where the last pass stopped, wrapping around, so that
 * records gc keeps pass by after a pass or two and never hide the rest
 * (a user's kept records in front of another user's lost job). No root
 * needed. */
#include "config.h"

#include "core/gc_window.h"
#include "unit.h"

int main(void)
{
	uint32_t ids[10], steps[10], out[4], out_steps[4];
	size_t cursor = 0;

	for (uint32_t i = 0; i < 10; i++) {
		ids[i] = 100 + i;
		steps[i] = i;
	}
	/* 10 records, 4 a pass: 100-103, 104-107, then 108, 109, 100, 101. */
	CHECK_INT(gc_window(ids, steps, 10, &cursor, out, out_steps, 4), 4);
	CHECK_INT(out[0], 100);
	CHECK_INT(out[3], 103);
	CHECK_INT(gc_window(ids, steps, 10, &cursor, out, out_steps, 4), 4);
	CHECK_INT(out[0], 104);
	CHECK_INT(gc_window(ids, steps, 10, &cursor, out, out_steps, 4), 4);
	CHECK_INT(out[0], 108);
	CHECK_INT(out[1], 109);
	CHECK_INT(out[2], 100);
	CHECK_INT(out_steps[1], 9);
	CHECK_INT(out_steps[2], 0);
	/* Every record was asked about within three passes: the last one,
	 * behind nine kept ones, in the third. */

	/* Fewer than the batch: all of them, from the cursor; the registry
	 * shrank below it: wrapped. */
	cursor = 7;
	CHECK_INT(gc_window(ids, NULL, 3, &cursor, out, NULL, 4), 3);
	CHECK_INT(out[0], 101);
	CHECK_INT(out[1], 102);
	CHECK_INT(out[2], 100);
	/* None: nothing, and the cursor starts over. */
	CHECK_INT(gc_window(ids, NULL, 0, &cursor, out, NULL, 4), 0);
	CHECK_INT(cursor, 0);
	return unit_exit_code();
}
