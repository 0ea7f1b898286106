//! The Plan page: the managers' wizard. The console's router shows it at `/plan/{id?}` as a
//! lazy route, so its code is a chunk of its own (split off the console's wasm by `./dev`) that
//! the browser fetches the first time someone opens Plan: signing in and every other page never
//! download it.

mod wizard;

pub use wizard::Plan;
