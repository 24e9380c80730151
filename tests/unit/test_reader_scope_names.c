/* The systemd unit names of the readers' slices (daemon/process/reader_scope.c):
 * valid unit names, one level below squashd-readers.slice whatever the
 * node is called (a '-' in a slice name makes a child slice); and of a
 * reader's scope, named by its user and pid. */
#include "config.h"

#include "process/reader_scope.h"
#include "unit.h"

int main(void)
{
	char out[READER_SCOPE_UNIT_MAX];

	CHECK_INT(reader_scope_slice_name("", 1001, out, sizeof(out)), 0);
	CHECK_STR(out, "squashd-readers-u1001.slice");
	CHECK_INT(reader_scope_slice_name("node-12-3f00aa11", 0, out, sizeof(out)), 0);
	CHECK_STR(out, "squashd-readers-node_12_3f00aa11_u0.slice");
	CHECK_INT(reader_scope_slice_name("a b/c\\d.e", 7, out, sizeof(out)), 0);
	CHECK_STR(out, "squashd-readers-a_b_c_d.e_u7.slice");
	CHECK_INT(reader_scope_slice_name("", 4294967294u, out, 20), -1);
	/* A reader's scope names its user too: one user's reader that
	 * ended is never another's that got the pid since. */
	reader_scope_unit_name(1001, 4242, out, sizeof(out));
	CHECK_STR(out, "squashd-reader-u1001-4242.scope");
	reader_scope_unit_name(1002, 4242, out, sizeof(out));
	CHECK_STR(out, "squashd-reader-u1002-4242.scope");
	return unit_exit_code();
}
