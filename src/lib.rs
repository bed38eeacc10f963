pub mod robots;
