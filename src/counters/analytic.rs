//! Backend module `analytic` (filled by its issue).
