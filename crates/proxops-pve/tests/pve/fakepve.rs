//! fakepve
