//! The region API shared by every backend (issue 5): `Session::region`, exported marker symbols, C ABI.
