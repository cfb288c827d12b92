/* SPDX-License-Identifier: GPL-2.0 */
/*
 * For kernels without KUnit static stubs (before v6.3): dmabuf_mock's
 * pause point, dmabuf_mock_pause(), is then an empty function, as it is on
 * any kernel built without KUnit. Kbuild searches this directory after the
 * kernel's own (-idirafter), so a kernel that has the header uses its own.
 */
#ifndef _DMABUF_MOCK_COMPAT_STATIC_STUB_H
#define _DMABUF_MOCK_COMPAT_STATIC_STUB_H

#define KUNIT_STATIC_STUB_REDIRECT(real_fn_name, args...) do { } while (0)

#endif
