//! OS input injection (xdotool, wtype, ydotool, enigo) behind one trait (arrives with the drive planner issue).
